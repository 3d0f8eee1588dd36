/* SPDX-License-Identifier: Apache-2.0 */
/* Element-wise reductions of the emulator's all-reduce. */
#include <stdint.h>

#include "emu.h"

bool crux_tb_reduce_supported(ncclDataType_t type, ncclRedOp_t op)
{
	if (op < ncclSum || op > ncclAvg)
		return false;
	switch (type) {
	case ncclInt8:
	case ncclUint8:
	case ncclInt32:
	case ncclUint32:
	case ncclInt64:
	case ncclUint64:
	case ncclFloat32:
	case ncclFloat64:
		return true;
	default:
		/* Half and 8-bit floats need conversions a CPU test double does not carry. */
		return false;
	}
}

#define CRUX_TB_RED_LOOP(T)                                                                        \
	do {                                                                                       \
		T *d = dst;                                                                        \
		const T *s = src;                                                                  \
		switch (op) {                                                                      \
		case ncclSum:                                                                      \
		case ncclAvg:                                                                      \
			for (size_t i = 0; i < n; i++)                                             \
				d[i] = (T)(d[i] + s[i]);                                           \
			break;                                                                     \
		case ncclProd:                                                                     \
			for (size_t i = 0; i < n; i++)                                             \
				d[i] = (T)(d[i] * s[i]);                                           \
			break;                                                                     \
		case ncclMax:                                                                      \
			for (size_t i = 0; i < n; i++)                                             \
				d[i] = s[i] > d[i] ? s[i] : d[i];                                  \
			break;                                                                     \
		case ncclMin:                                                                      \
			for (size_t i = 0; i < n; i++)                                             \
				d[i] = s[i] < d[i] ? s[i] : d[i];                                  \
			break;                                                                     \
		default:                                                                           \
			break;                                                                     \
		}                                                                                  \
	} while (0)

void crux_tb_reduce(void *dst, const void *src, size_t n, ncclDataType_t type, ncclRedOp_t op)
{
	switch (type) {
	case ncclInt8:
		CRUX_TB_RED_LOOP(int8_t);
		break;
	case ncclUint8:
		CRUX_TB_RED_LOOP(uint8_t);
		break;
	case ncclInt32:
		CRUX_TB_RED_LOOP(int32_t);
		break;
	case ncclUint32:
		CRUX_TB_RED_LOOP(uint32_t);
		break;
	case ncclInt64:
		CRUX_TB_RED_LOOP(int64_t);
		break;
	case ncclUint64:
		CRUX_TB_RED_LOOP(uint64_t);
		break;
	case ncclFloat32:
		CRUX_TB_RED_LOOP(float);
		break;
	case ncclFloat64:
		CRUX_TB_RED_LOOP(double);
		break;
	default:
		break;
	}
}

#define CRUX_TB_AVG_LOOP(T)                                                                        \
	do {                                                                                       \
		T *b = buf;                                                                        \
		for (size_t i = 0; i < n; i++)                                                     \
			b[i] = (T)(b[i] / (T)nranks);                                              \
	} while (0)

void crux_tb_reduce_avg_finish(void *buf, size_t n, ncclDataType_t type, int nranks)
{
	switch (type) {
	case ncclInt8:
		CRUX_TB_AVG_LOOP(int8_t);
		break;
	case ncclUint8:
		CRUX_TB_AVG_LOOP(uint8_t);
		break;
	case ncclInt32:
		CRUX_TB_AVG_LOOP(int32_t);
		break;
	case ncclUint32:
		CRUX_TB_AVG_LOOP(uint32_t);
		break;
	case ncclInt64:
		CRUX_TB_AVG_LOOP(int64_t);
		break;
	case ncclUint64:
		CRUX_TB_AVG_LOOP(uint64_t);
		break;
	case ncclFloat32:
		CRUX_TB_AVG_LOOP(float);
		break;
	case ncclFloat64:
		CRUX_TB_AVG_LOOP(double);
		break;
	default:
		break;
	}
}
