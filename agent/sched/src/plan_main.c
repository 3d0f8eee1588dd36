/* SPDX-License-Identifier: Apache-2.0 */
/* crux-plan: the scheduler's "plan" command on its own. */
#include "crux/sched_cli.h"

int main(int argc, char **argv)
{
	return crux_sched_plan_cli(argc, argv);
}
