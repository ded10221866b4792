/*
 * tools — the commands of src/tools: run analysis (verify, report) and the
 * seeds' worked examples as tools (jitter, plan, demo, demo resilience).
 * Each takes the arguments after its own name and returns the process exit
 * status (0 ok, 1 failure, 2 usage or config error); cli/main.c maps the
 * names to these.
 */
#ifndef TG_TOOLS_H
#define TG_TOOLS_H

int cmd_verify(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_jitter(int argc, char **argv);
int cmd_plan(int argc, char **argv);
/* `tollgate demo resilience`: cmd_demo passes argv after "resilience". */
int cmd_demo_resilience(int argc, char **argv);

#endif
