package main

import (
	"log/slog"
	"os"
	"strconv"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/maestro-aws/maestro/engine/flow"
)

// memoryBudget sizes what the engine's flows may hold (flow.Config.
// MemoryBudget) from the process's memory limit, and makes the garbage
// collector aware of that limit:
//
//   - MAESTRO_MEMORY_BUDGET (bytes) sets the budget explicitly;
//   - otherwise, under a cgroup memory limit (an ECS task's size, a
//     container's limit), the budget is 40% of it, and GOMEMLIMIT, unless
//     set, becomes 85% of it, so the heap is collected harder before the
//     kernel would kill the process;
//   - with neither, flow.DefaultMemoryBudget.
//
// GOMEMLIMIT alone is not a cap: the budget is what keeps a run's params
// and expressions from growing the process, and GOMEMLIMIT returns garbage
// to the system in time.
func memoryBudget(logger *slog.Logger) int64 {
	if v, err := strconv.ParseInt(os.Getenv("MAESTRO_MEMORY_BUDGET"), 10, 64); err == nil && v > 0 {
		logger.Info("engine memory budget", "budget_bytes", v, "source", "MAESTRO_MEMORY_BUDGET")
		return v
	}
	limit, err := memlimit.FromCgroup()
	if err != nil || limit == 0 || limit > 1<<50 {
		logger.Info("engine memory budget", "budget_bytes", flow.DefaultMemoryBudget, "source", "default")
		return flow.DefaultMemoryBudget
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		if set, err := memlimit.Set(memlimit.WithRatio(0.85), memlimit.WithProvider(memlimit.Limit(limit))); err == nil {
			logger.Info("GOMEMLIMIT set from the cgroup memory limit", "cgroup_limit_bytes", limit, "gomemlimit_bytes", set)
		}
	}
	budget := int64(limit) * 2 / 5
	logger.Info("engine memory budget", "budget_bytes", budget, "source", "cgroup", "cgroup_limit_bytes", limit)
	return budget
}
