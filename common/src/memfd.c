/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sealed memfd records: the v2 contract's shared state. A sealed memfd
 * cannot change size (F_SEAL_SHRINK | F_SEAL_GROW), so a mapping of it can
 * never fault with SIGBUS; with F_SEAL_FUTURE_WRITE only the creator's own
 * earlier mapping can write it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/log.h"
#include "crux/shm.h"

_Static_assert(CRUX_SEALS_PROFILE == (F_SEAL_SHRINK | F_SEAL_GROW), "profile seals");
_Static_assert(CRUX_SEALS_TABLE == (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE),
	       "table seals");

crux_status_t crux_memfd_create(const char *name, uint32_t magic, uint16_t layout_version,
				size_t size, unsigned seals, crux_shm_init_fn init, void *init_arg,
				struct crux_shm_map *out, char *err, size_t errlen)
{
	crux_status_t st;
	void *base = MAP_FAILED;
	uint64_t start = 0;

	if (!name || !out || size < sizeof(struct crux_shm_header)) {
		crux_set_err(err, errlen, "bad memfd name or size");
		return CRUX_ERR_INVAL;
	}
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		crux_set_err(err, errlen, "memfd_create(%s): %s (Linux 3.17 or newer needed)", name,
			     strerror(errno));
		return errno == ENOSYS ? CRUX_ERR_UNSUPPORTED : CRUX_ERR_IO;
	}
	if (ftruncate(fd, (off_t)size) != 0) {
		crux_set_err(err, errlen, "cannot size memfd %s: %s", name, strerror(errno));
		st = CRUX_ERR_IO;
		goto fail;
	}
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		crux_set_err(err, errlen, "cannot map memfd %s: %s", name, strerror(errno));
		st = CRUX_ERR_IO;
		goto fail;
	}
	struct crux_shm_header *h = base;
	crux_proc_start_time(getpid(), &start);
	h->magic = magic;
	h->layout_version = layout_version;
	h->header_size = sizeof(*h);
	h->total_size = size;
	h->writer_pid = (uint32_t)getpid();
	h->writer_start_time = start;
	if (init)
		init(base, init_arg);
	if (seals && fcntl(fd, F_ADD_SEALS, (int)seals) != 0) {
		crux_set_err(err, errlen, "cannot seal memfd %s: %s (Linux 5.1 or newer needed)",
			     name, strerror(errno));
		st = CRUX_ERR_UNSUPPORTED;
		goto fail;
	}
	memset(out, 0, sizeof(*out));
	out->base = base;
	out->size = size;
	out->fd = fd;
	out->writable = true;
	/* An empty path marks an anonymous record: nothing to compare by name. */
	return CRUX_OK;

fail:
	if (base != MAP_FAILED)
		munmap(base, size);
	close(fd);
	return st;
}

crux_status_t crux_memfd_map(int fd, uint32_t magic, uint16_t layout_version, size_t size,
			     unsigned need_seals, bool writable, struct crux_shm_map *out,
			     char *err, size_t errlen)
{
	struct stat sb;
	char why[256];
	crux_status_t st;

	if (fd < 0 || !out) {
		crux_set_err(err, errlen, "no descriptor");
		return CRUX_ERR_INVAL;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		crux_set_err(err, errlen, "the descriptor is not a regular file");
		return CRUX_ERR_PERM;
	}
	if ((size_t)sb.st_size != size) {
		crux_set_err(err, errlen, "the record has %lld bytes, expected %zu",
			     (long long)sb.st_size, size);
		return CRUX_ERR_CORRUPT;
	}
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || ((unsigned)seals & need_seals) != need_seals) {
		crux_set_err(err, errlen,
			     "the record is not sealed against size changes (seals 0x%x, "
			     "need 0x%x): it could be truncated under the mapping",
			     seals < 0 ? 0u : (unsigned)seals, need_seals);
		return CRUX_ERR_PERM;
	}
	int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (own < 0) {
		crux_set_err(err, errlen, "cannot duplicate the descriptor: %s", strerror(errno));
		return CRUX_ERR_IO;
	}
	void *base =
	    mmap(NULL, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, own, 0);
	if (base == MAP_FAILED) {
		crux_set_err(err, errlen, "cannot map the record: %s", strerror(errno));
		close(own);
		return CRUX_ERR_IO;
	}
	st = crux_shm_validate_ex(base, size, magic, layout_version, size, why, sizeof(why));
	if (st != CRUX_OK) {
		crux_set_err(err, errlen, "%s", why);
		munmap(base, size);
		close(own);
		return st;
	}
	memset(out, 0, sizeof(*out));
	out->base = base;
	out->size = size;
	out->fd = own;
	out->writable = writable;
	return CRUX_OK;
}
