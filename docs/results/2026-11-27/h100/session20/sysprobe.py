"""Run a command and sample, every 0.1 s on perf_counter's clock (CLOCK_MONOTONIC, shared with tailwatch's trace),
what could stall a whole process: its cgroup's CPU throttling (cpu.stat), the host's steal and iowait (/proc/stat),
the process's page faults (/proc/PID/stat, all threads), its threads' run-queue waits (schedstat), compaction and
THP faults (/proc/vmstat). Usage: sysprobe.py OUT.tsv -- command..."""
import glob
import os
import subprocess
import sys
import time

out_path = sys.argv[1]
cmd = sys.argv[sys.argv.index("--") + 1:]


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


V1 = next((d for d in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct") if os.path.exists(d + "/cpu.stat")),
          "")
V1A = next((d for d in ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct")
            if os.path.exists(d + "/cpuacct.usage")), "")


def cpu_stat():
    v2 = read("/sys/fs/cgroup/cpu.stat")
    if v2:
        fields = dict(line.split() for line in v2.splitlines() if len(line.split()) == 2)
        return [int(fields.get(k, 0)) for k in ("usage_usec", "nr_throttled", "throttled_usec")]
    v1 = dict(line.split() for line in read(f"{V1}/cpu.stat").splitlines() if len(line.split()) == 2)
    usage = read(f"{V1A}/cpuacct.usage").strip() or "0"
    return [int(usage) // 1000, int(v1.get("nr_throttled", 0)), int(v1.get("throttled_time", 0)) // 1000]


def host():
    cpu = read("/proc/stat").splitlines()[0].split()[1:]
    vm = dict(line.split() for line in read("/proc/vmstat").splitlines())
    # user..steal in USER_HZ ticks: iowait = 5th, steal = 8th
    return [int(cpu[4]), int(cpu[7]), sum(int(x) for x in cpu[:8]),
            int(vm.get("compact_stall", 0)), int(vm.get("thp_fault_alloc", 0)), int(vm.get("pgmajfault", 0))]


def proc(pid):
    s = read(f"/proc/{pid}/stat")
    if not s:
        return [0, 0, 0, 0]
    f = s[s.rindex(")") + 2:].split()
    wait = 0
    tasks = glob.glob(f"/proc/{pid}/task/*/schedstat")
    for t in tasks:
        parts = read(t).split()
        if len(parts) >= 2:
            wait += int(parts[1])
    return [int(f[7]), int(f[9]), wait // 1000, len(tasks)]  # minflt, majflt, run-queue wait µs, threads


header = ["t", "usage_usec", "nr_throttled", "throttled_usec", "iowait", "steal", "cpu_total", "compact_stall",
          "thp_fault_alloc", "pgmajfault", "minflt", "majflt", "rq_wait_usec", "threads"]
with open(out_path, "w") as log:
    quota = read("/sys/fs/cgroup/cpu.max") or read(f"{V1}/cpu.cfs_quota_us") + "/" + read(f"{V1}/cpu.cfs_period_us")
    log.write(f"# cpu.max={quota.strip().replace(chr(10), '')} "
              f"cpuset={read('/sys/fs/cgroup/cpuset.cpus.effective').strip()} "
              f"thp={read('/sys/kernel/mm/transparent_hugepage/enabled').strip()} "
              f"defrag={read('/sys/kernel/mm/transparent_hugepage/defrag').strip()} nproc={os.cpu_count()}\n")
    log.write("\t".join(header) + "\n")
    child = subprocess.Popen(cmd)
    while child.poll() is None:
        row = [time.perf_counter(), *cpu_stat(), *host(), *proc(child.pid)]
        log.write("\t".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in row) + "\n")
        time.sleep(0.1)
sys.exit(child.returncode)
