/*
 * commands — the subcommands of the tollgate binary. Each takes argv from
 * its own name on (argv[0] is "serve", "manual", ...: the options follow, as
 * for a main()) and returns the process exit status (0 ok, 1 failure, 2
 * usage or config error); it never calls exit(). main.c maps names to these in
 * one table; a new command adds its line there and its prototype here (or,
 * for a tool, in tools/tools.h).
 */
#ifndef TG_COMMANDS_H
#define TG_COMMANDS_H

#include "tools/tools.h"

int cmd_serve(int argc, char **argv);
int cmd_dispatch(int argc, char **argv);
int cmd_api(int argc, char **argv);

int cmd_manual(int argc, char **argv);
int cmd_calls(int argc, char **argv);
int cmd_submit(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_reconcile(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_backup(int argc, char **argv);
int cmd_token(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_account(int argc, char **argv);

#endif
