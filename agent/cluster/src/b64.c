/* SPDX-License-Identifier: Apache-2.0 */
/* Strict base64 (RFC 4648 alphabet, '=' padding): etcd's JSON gateway encodes
 * every key and value this way. Anything else is refused. */
#include "crux/etcd.h"

static const char b64_alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t crux_b64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

void crux_b64_encode(const void *in, size_t n, char *out)
{
	const uint8_t *p = in;
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		out[o++] = b64_alpha[(v >> 18) & 63];
		out[o++] = b64_alpha[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64_alpha[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? b64_alpha[v & 63] : '=';
	}
	out[o] = '\0';
}

static int b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

crux_status_t crux_b64_decode(const char *in, size_t len, uint8_t *out, size_t *outlen)
{
	if (len % 4 != 0)
		return CRUX_ERR_CORRUPT;
	size_t o = 0;
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		int pad = 0;
		if (last && in[i + 3] == '=')
			pad = in[i + 2] == '=' ? 2 : 1;
		int v[4];
		for (int k = 0; k < 4 - pad; k++) {
			v[k] = b64_val(in[i + k]);
			if (v[k] < 0)
				return CRUX_ERR_CORRUPT;
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12;
		if (pad < 2)
			w |= (uint32_t)v[2] << 6;
		if (pad < 1)
			w |= (uint32_t)v[3];
		/* Non-canonical encodings (stray bits under the padding) are refused. */
		if ((pad == 2 && (w & 0xffff)) || (pad == 1 && (w & 0xff)))
			return CRUX_ERR_CORRUPT;
		out[o++] = (uint8_t)(w >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(w >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)w;
	}
	out[o] = 0;
	*outlen = o;
	return CRUX_OK;
}
