/*
 * plan_sim — `tollgate plan --simulate`: the plan's numbers run through the
 * real dispatcher (tollgate api + tollgate dispatch, SQLite store in a temp
 * dir) against tollgate-stub in fast mode, all on loopback and all started
 * and stopped here. Prints measured vs analytic.
 */
#ifndef TG_PLAN_SIM_H
#define TG_PLAN_SIM_H

#include "tools/capacity.h"

struct plan_sim_options {
        double time_scale;  /* 0 < F <= 1: rates / F, counts unchanged, times x F */
        double max_seconds; /* real seconds to measure at most; 0 = derived */
};

/* 0 measured (or, for a plan that never drains, shown not to drain);
 * TG_EINVAL too many operations to simulate; TG_ENOTFOUND no tollgate-stub
 * next to this binary; TG_EIO a process failed or the backlog did not
 * drain when it should have. A message was printed in each case. */
int plan_simulate(const struct capacity_input *input, const struct capacity_plan *plan,
                  const struct plan_sim_options *options);

#endif
