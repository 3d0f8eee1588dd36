/* SPDX-License-Identifier: Apache-2.0 */
/* The one 64-bit mixer: address hashes and the decision table's index. */
#ifndef CRUX_HASH_H
#define CRUX_HASH_H

#include <stdint.h>

/* splitmix64's finaliser. */
static inline uint64_t crux_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

#endif /* CRUX_HASH_H */
