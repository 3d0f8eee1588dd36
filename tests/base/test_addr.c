/* SPDX-License-Identifier: Apache-2.0 */
/* Socket addresses as text, through the one union of both families. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <arpa/inet.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <string.h>
#include <sys/un.h>

#include "crux/addr.h"

static void test_sockaddr_format(void **state)
{
	(void)state;
	union crux_sockaddr u;
	char buf[64];

	memset(&u, 0, sizeof(u));
	u.sin.sin_family = AF_INET;
	u.sin.sin_port = htons(5000);
	assert_int_equal(inet_pton(AF_INET, "198.18.0.1", &u.sin.sin_addr), 1);
	assert_ptr_equal(crux_sockaddr_format(&u.sa, buf, sizeof(buf)), buf);
	assert_string_equal(buf, "198.18.0.1:5000");

	memset(&u, 0, sizeof(u));
	u.sin6.sin6_family = AF_INET6;
	u.sin6.sin6_port = htons(65535);
	assert_int_equal(inet_pton(AF_INET6, "fd00::1", &u.sin6.sin6_addr), 1);
	assert_string_equal(crux_sockaddr_format(&u.sa, buf, sizeof(buf)), "[fd00::1]:65535");
	/* a short buffer is cut and terminated */
	assert_string_equal(crux_sockaddr_format(&u.sa, buf, 6), "[fd00");

	struct sockaddr_un un = {.sun_family = AF_UNIX};
	assert_string_equal(crux_sockaddr_format((const struct sockaddr *)&un, buf, sizeof(buf)),
			    "(family 1)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sockaddr_format),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
