package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SelfCPU is the CPU time (user and system) this process has used so far,
// for benchmarks that report what each object cost.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BackendsCPU is the CPU time used so far by each backend connected to
// pool's database, by process id, read from /proc/PID/stat: the server
// runs on this machine. A backend that ended meanwhile is left out.
func BackendsCPU(tb testing.TB, pool *pgxpool.Pool) map[int32]time.Duration {
	tb.Helper()
	rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	out := map[int32]time.Duration{}
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			tb.Fatal(err)
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // ended meanwhile
		}
		// Fields after the command (which may hold spaces): utime and
		// stime are the 14th and 15th of the line, in clock ticks
		// (USER_HZ, 100 on Linux).
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[pid] = time.Duration(ut+st) * time.Second / 100
	}
	return out
}
