/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "plan" command shared by cruxctl and crux-plan:
 *   plan --topology FILE --jobs FILE [--levels K] [--seed N] [--orders M]
 *        [--policy NAME] [--json]
 * FILE for --topology may also be "lingjun:CSV" or "clos2:TORS,AGGS,HOSTS".
 * argv[0] is the command name. Prints to stdout, errors to stderr.
 * Returns a process exit status (0 ok, 1 bad input, 2 usage).
 */
#ifndef CRUX_SCHED_CLI_H
#define CRUX_SCHED_CLI_H

#ifdef __cplusplus
extern "C" {
#endif

int crux_sched_plan_cli(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_SCHED_CLI_H */
