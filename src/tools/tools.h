/*
 * tools — the commands of src/tools: run analysis (verify, report) and the
 * seeds' worked examples as tools (jitter, plan, demo, demo resilience).
 * Each takes argv from its own name on (argv[0] is "jitter", ...: the
 * options follow, as for a main()) and returns the process exit status (0
 * ok, 1 failure, 2 usage or config error), never calling exit(); cli/main.c
 * maps the names to these.
 */
#ifndef TG_TOOLS_H
#define TG_TOOLS_H

int cmd_verify(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_jitter(int argc, char **argv);
int cmd_plan(int argc, char **argv);
/* `tollgate demo resilience`: cmd_demo passes argv from "resilience" on. */
int cmd_demo_resilience(int argc, char **argv);

#endif
