/* SPDX-License-Identifier: Apache-2.0 */
/* Network interfaces as plugin devices: names, addresses, speed, PCI path. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/log.h"
#include "cruxn.h"

#define CRUXN_DEFAULT_SPEED_MBPS 10000

static int read_speed(const char *ifname)
{
	char path[128];
	int speed = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
	f = fopen(path, "r");
	if (!f)
		return CRUXN_DEFAULT_SPEED_MBPS;
	/* Virtual links report -1 or fail the read with EINVAL. */
	if (fscanf(f, "%d", &speed) != 1 || speed <= 0)
		speed = CRUXN_DEFAULT_SPEED_MBPS;
	fclose(f);
	return speed;
}

static char *read_pci_path(const char *ifname)
{
	char path[128];
	char real[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/class/net/%s/device", ifname);
	if (!realpath(path, real))
		return NULL; /* virtual device: no PCI function behind it */
	if (!strstr(real, "/pci"))
		return NULL;
	return strdup(real);
}

static bool already_listed(const struct cruxn_dev *devs, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(devs[i].name, name) == 0)
			return true;
	return false;
}

/* One pass over the interfaces taking addresses of family 'fam' only. */
static void scan_family(const struct cruxn_config *cfg, struct ifaddrs *list, int fam,
			struct cruxn_dev *devs, int max, int *n)
{
	for (struct ifaddrs *ifa = list; ifa && *n < max; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != fam)
			continue;
		if (!(ifa->ifa_flags & IFF_UP) || strlen(ifa->ifa_name) >= CRUXN_IFNAME_LEN)
			continue;
		if (!cruxn_ifname_match(cfg->ifname_spec, ifa->ifa_name))
			continue;
		if (fam == AF_INET6) {
			const struct sockaddr_in6 *s6 = (const void *)ifa->ifa_addr;
			/* Link-local addresses need a scope at every peer: skip them. */
			if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
				continue;
		}
		if (already_listed(devs, *n, ifa->ifa_name))
			continue;
		struct cruxn_dev *d = &devs[*n];
		memset(d, 0, sizeof(*d));
		snprintf(d->name, sizeof(d->name), "%s", ifa->ifa_name);
		if (fam == AF_INET) {
			memcpy(&d->addr.sin, ifa->ifa_addr, sizeof(d->addr.sin));
			d->addrlen = sizeof(d->addr.sin);
		} else {
			memcpy(&d->addr.sin6, ifa->ifa_addr, sizeof(d->addr.sin6));
			d->addrlen = sizeof(d->addr.sin6);
		}
		d->speed_mbps = read_speed(d->name);
		d->pci_path = read_pci_path(d->name);
		(*n)++;
	}
}

crux_status_t cruxn_devices_scan(const struct cruxn_config *cfg, struct cruxn_dev *devs, int max,
				 int *ndevs)
{
	struct ifaddrs *list = NULL;
	int n = 0;

	if (getifaddrs(&list) != 0) {
		crux_err("getifaddrs failed: %m");
		return CRUX_ERR_IO;
	}
	/* IPv4 first (as NCCL does), IPv6 for interfaces without IPv4. */
	if (cfg->family != CRUXN_FAM_V6)
		scan_family(cfg, list, AF_INET, devs, max, &n);
	if (cfg->family != CRUXN_FAM_V4)
		scan_family(cfg, list, AF_INET6, devs, max, &n);
	freeifaddrs(list);
	*ndevs = n;
	return CRUX_OK;
}

void cruxn_devices_free(struct cruxn_dev *devs, int ndevs)
{
	for (int i = 0; i < ndevs; i++) {
		free(devs[i].pci_path);
		devs[i].pci_path = NULL;
	}
}
