#!/usr/bin/env python3
"""rdma-core's own Python tests (pyverbs) on the simulated NIC behind target/shim.

Debian's python3-pyverbs ships the tests of its rdma-core release, gzipped, under
/usr/share/doc/rdma-core/tests. This runner unpacks them into a scratch folder (as the package
`tests`), runs each test module under the shim with a timeout, and compares every test's
outcome with the expectations table beside this file (rdma_core_suite.expected).

The run fails on any failure, error, crash (a signal) or hang (the timeout); on any test that
does not pass and is not in the table; on any table line whose test now passes or ends
otherwise than listed; and on any table line whose reason is still the placeholder. A module
that crashes or hangs is run again from the test after the one that crashed, so one crash
hides nothing. The last line printed is `N passed, N failed, N skipped`, where a test whose
outcome is a problem counts as failed.

    capi/tests/rdma_core_suite.py [--shim DIR] [--source DIR] [--scratch DIR] [--timeout S]
                                  [--seed N] [--update] [--selftest] [MODULE ...]

--update rewrites the table from the run: reasons of lines that stay are kept, new lines get
the placeholder reason (which fails the run until someone writes the real one), lines whose
test now passes are dropped. Failures, errors, crashes and hangs are never written.
"""

import argparse
import gzip
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TABLE = os.path.join(HERE, "rdma_core_suite.expected")
PLACEHOLDER = "TODO: write why"
# The outcomes a table line may expect: a test that fails, errors, crashes or hangs is a bug
# to fix, never an expectation -- except an error a test meets for a feature not simulated yet
# that it has no skip for (its line's reason must say so, with NOT_YET).
EXPECTABLE = ("skip", "xfail")
NOT_YET = "feature not simulated yet:"


def default_pci_dev():
    """The VFIO function of the default profile (the shim's MLX5SIM_PROFILE default)."""
    path = os.path.join(ROOT, "sim", "profiles", "cx6dx.toml")
    try:
        with open(path, "rb") as f:
            return tomllib.load(f).get("vfio_pci_name", "0000:08:00.0")
    except (OSError, tomllib.TOMLDecodeError):
        return "0000:08:00.0"


# RDMA CM's tests find the address to use from a net interface bound to the device
# (/sys/class/infiniband/<dev>/device/net/<ifname>, then `ip -j addr show <ifname>`), and run
# their two sides in two processes forked from the test on that one address. These modules run
# in a private mount and network namespace (`unshare -m -n`, as root) that shows such a host:
# its `lo` carries the simulated port's address (and no other IPv4 one, so it is the first the
# test reads), a tmpfs over /sys/class binds `lo` to the device (every other class still
# there, as links to the real ones), and the shim's first port takes that address
# (MLX5SIM_ADDR). The namespace keeps the traffic off the host's network.
NETNS_MODULES = ("test_rdmacm", "test_mlx5_rdmacm")
# The skip of their tests where the namespace cannot be made: counted as skipped, needing no
# table line (the host decides it, not the simulator).
NETNS_SKIP = "needs a private network namespace (unshare -m -n, as root) to bind a net interface to the device"
NETNS_ADDR = "127.0.52.1"
NETNS_SETUP = """\
set -e
ip link set lo up
ip addr add {addr}/24 dev lo
ip addr del 127.0.0.1/8 dev lo
real=$(mktemp -d)
mount --bind /sys/class "$real"
mount -t tmpfs mlx5sim /sys/class
for e in "$real"/*; do
    [ "$(basename "$e")" = infiniband ] || ln -s "$e" /sys/class/
done
mkdir -p /sys/class/infiniband/{dev}/device/net/lo
exec "$@"
"""


def default_device():
    """The first device name of the default profile."""
    path = os.path.join(ROOT, "sim", "profiles", "cx6dx.toml")
    try:
        with open(path, "rb") as f:
            return tomllib.load(f).get("device", {}).get("name", "mlx5_0")
    except (OSError, tomllib.TOMLDecodeError):
        return "mlx5_0"


def netns_prefix():
    """The command that runs a test process in the namespace of NETNS_MODULES; None with
    the reason when this host cannot make one (not root, no unshare or ip, or refused)."""
    if os.geteuid() != 0:
        return None, "not root"
    for tool in ("unshare", "ip", "sh"):
        if not shutil.which(tool):
            return None, f"no {tool}"
    script = NETNS_SETUP.format(addr=NETNS_ADDR, dev=default_device())
    cmd = ["unshare", "-m", "-n", "sh", "-c", script, "netns"]
    try:
        probe = subprocess.run(cmd + ["true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    if probe.returncode != 0:
        return None, (probe.stderr.strip().splitlines() or ["refused"])[-1]
    return cmd, None
# Modules that need a device the default profile is not: the shipped profile they run on.
# DMA memcpy needs the DMA-MMO engine, which only the BlueField profile has.
# VARs need virtio emulation, which only the BlueField profile has.
MODULE_PROFILES = {"test_mlx5_dma_memcpy": "bf3", "test_mlx5_var": "bf3"}


def module_args(module):
    """Arguments a module needs beyond `-v`."""
    if module == "test_mlx5_vfio":
        return ["--pci-dev", default_pci_dev()]
    return []


# Loaded by each test process before the tests. The tests draw QP types, sizes and creation
# flags from Python's `random`: seeding it makes a run repeatable, so a table line cannot flip
# between runs. And unittest 3.11 prints a setUpClass skip or error after an "expected
# failure" without naming the fixture: it is made to name it, so the parser can tell whose
# it is.
SITECUSTOMIZE = """\
import os, random, unittest.runner, unittest.suite
_seed = os.environ.get("RDMA_CORE_SUITE_SEED", "")
if _seed:
    random.seed(int(_seed))
_write_status = unittest.runner.TextTestResult._write_status
def _named(self, test, status):
    if isinstance(test, unittest.suite._ErrorHolder):
        if not self._newline:
            self.stream.writeln()
        self._newline = True
    _write_status(self, test, status)
unittest.runner.TextTestResult._write_status = _named
"""


def unpack(source, scratch):
    """Copy the tests into <scratch>/tests, gunzipping the .gz files; returns the folder."""
    dest = os.path.join(scratch, "tests")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(dest)
    os.makedirs(os.path.join(scratch, "site"))
    with open(os.path.join(scratch, "site", "sitecustomize.py"), "w", encoding="utf-8") as f:
        f.write(SITECUSTOMIZE)
    for name in sorted(os.listdir(source)):
        src = os.path.join(source, name)
        if not os.path.isfile(src):
            continue
        if name.endswith(".gz"):
            with gzip.open(src, "rb") as fin, open(os.path.join(dest, name[:-3]), "wb") as fout:
                shutil.copyfileobj(fin, fout)
        else:
            shutil.copy(src, os.path.join(dest, name))
    return dest


# unittest -v: "name (tests.module.Class.name)" (a subtest adds " [msg]" or " (params)"),
# "setUpClass (tests.module.Class)", "setUpModule (tests.module)"; then, after the docstring's
# first line if any, " ... " and the status.
HEADER = re.compile(r"^\s*(\w+) \((tests(?:\.\w+)+)\)(.*)$")
STATUS = re.compile(
    r"(?:^|\s\.\.\. )(ok|FAIL|ERROR|expected failure|unexpected success|"
    r"skipped (?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))\s*$"
)
RANK = {"pass": 0, "skip": 1, "xfail": 1, "xpass": 2, "fail": 3, "error": 4}


def status_outcome(status):
    """(outcome, detail) of a unittest status word."""
    if status == "ok":
        return "pass", ""
    if status == "FAIL":
        return "fail", ""
    if status == "ERROR":
        return "error", ""
    if status == "expected failure":
        return "xfail", ""
    if status == "unexpected success":
        return "xpass", ""
    return "skip", status[len("skipped ") :].strip()[1:-1]


def parse(stderr, listed):
    """Outcomes of one run's stderr: ({test id: (outcome, detail)}, id of a test left open)."""
    results = {}
    current = None  # (test id, or class/module for a fixture)
    for line in stderr.splitlines():
        header = HEADER.match(line)
        if header:
            name, where, rest = header.groups()
            if name in ("setUpClass", "tearDownClass", "setUpModule", "tearDownModule"):
                current = ("fixture", name, where)
            else:
                current = ("test", where)
            line = rest
        if current is None:
            continue
        status = STATUS.search(line)
        if not status:
            continue
        outcome = status_outcome(status.group(1))
        if current[0] == "fixture":
            # A fixture that skips or fails does so for every test under it.
            _, name, where = current
            if name.startswith("setUp"):
                for test in listed:
                    if test.startswith(where + "."):
                        record(results, test, outcome)
            elif outcome[0] != "pass":
                # A teardown that fails is reported under its own name.
                record(results, f"{where}.{name}", outcome)
        else:
            record(results, current[1], outcome)
        current = None
    open_test = current[1] if current and current[0] == "test" else None
    return results, open_test


def record(results, test, outcome):
    """Keep the worst outcome of a test (its subtests report one each)."""
    old = results.get(test)
    if old is None or RANK[outcome[0]] > RANK[old[0]]:
        results[test] = outcome


def run_module(args, tests_dir, module, listed):
    """Every test of one module; a crash or hang reruns the tests after the one it stopped in."""
    results = {}
    runs = []
    names = []  # empty: the whole module
    env = test_env(args)
    if module in MODULE_PROFILES and "MLX5SIM_PROFILE" not in os.environ:
        env["MLX5SIM_PROFILE"] = MODULE_PROFILES[module]
    prefix = []
    if module in NETNS_MODULES:
        prefix, why = netns_prefix()
        if prefix is None:
            # Never passed without the namespace: reported as skipped, with the reason.
            reason = f"{NETNS_SKIP}: {why}"
            return {t: ("skip", reason) for t in listed}, runs
        env["MLX5SIM_ADDR"] = NETNS_ADDR
    while True:
        cmd = prefix + [args.python, "tests/run_tests.py", "-v"]
        cmd += names if names else ["tests." + module]
        cmd += module_args(module)
        log = os.path.join(args.scratch, "logs", f"{module}.{len(runs)}")
        with open(log + ".out", "wb") as out, open(log + ".err", "wb") as err:
            proc = subprocess.Popen(
                cmd, cwd=os.path.dirname(tests_dir), env=env, stdout=out, stderr=err,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
            try:
                rc = proc.wait(timeout=args.timeout)
                hung = False
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait()
                hung = True
        with open(log + ".err", encoding="utf-8", errors="replace") as f:
            stderr = f.read()
        got, open_test = parse(stderr, listed)
        results.update(got)
        runs.append((rc, hung, open_test))
        if not hung and rc >= 0:
            break
        # Stopped by a signal or the timeout: the open test is the one it stopped in.
        if hung:
            how = ("hang", f"no end within {args.timeout} s")
        else:
            how = ("crash", f"killed by {signal_name(-rc)}")
        if open_test:
            results[open_test] = how
        rest = [t for t in listed if t not in results]
        if not open_test or not rest or len(runs) > len(listed):
            # Stopped outside any test (loading, a fixture): what did not run is marked so.
            for t in rest:
                results[t] = (how[0], how[1] + " before this test started")
            break
        names = rest
    for t in listed:
        if t not in results:
            results[t] = ("error", "no outcome printed (see " + log + ".err)")
    return results, runs


def test_env(args):
    """The tests' environment: the shim first on the library path, the seed."""
    site = os.path.join(args.scratch, "site")
    path = os.pathsep.join(p for p in (site, os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, LD_LIBRARY_PATH=args.shim, PYTHONDONTWRITEBYTECODE="1",
                PYTHONPATH=path, RDMA_CORE_SUITE_SEED=args.seed)


def signal_name(num):
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def list_tests(args, tests_dir):
    """Every test id the package loads, by module."""
    env = test_env(args)
    proc = subprocess.run(
        [args.python, "tests/run_tests.py", "--list-tests"], cwd=os.path.dirname(tests_dir),
        env=env, capture_output=True, text=True, timeout=args.timeout,
    )
    by_module = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split(".")
        if len(parts) >= 4 and parts[0] == "tests":
            by_module.setdefault(parts[1], []).append(line.strip())
    if proc.returncode != 0 or not by_module:
        sys.exit(f"listing the tests failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return by_module


def read_table(path):
    """{test id: (outcome, reason)} and a list of malformed lines."""
    table, bad = {}, []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return table, bad
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.match(r"^(tests\.\S+)\s+(\w+):\s*(.*)$", line)
        not_yet_error = m and m.group(2) == "error" and m.group(3).strip().startswith(NOT_YET)
        if not m or (m.group(2) not in EXPECTABLE and not not_yet_error) or m.group(1) in table:
            bad.append(f"{path}:{n}: {line}")
            continue
        table[m.group(1)] = (m.group(2), m.group(3).strip())
    return table, bad


TABLE_HEAD = """\
# What rdma-core 44's Python tests do on the simulator when they do not pass
# (capi/tests/rdma_core_suite.py; docs/rdma-core-tests.md). One line per test:
#   <test id> <skip|xfail>: <why>
# A test that fails, errors, crashes or hangs is a bug and is never listed, but for an error a
# test meets on a feature not simulated yet where it has no skip: `<test id> error: feature not
# simulated yet: ...`. `--update` rewrites this file from a run, keeping the reasons written
# here (and such error lines whose test still errors).
"""


def write_table(path, table):
    with open(path, "w", encoding="utf-8") as f:
        f.write(TABLE_HEAD)
        for test in sorted(table):
            outcome, reason = table[test]
            f.write(f"{test} {outcome}: {reason}\n")


def compare(results, table, whole):
    """The problems of a run against the table, and its counts: a test whose outcome is a
    problem counts as failed, whatever it was. `whole`: every module ran, so a table line
    whose test did not run is stale."""
    problems, counts = [], {"passed": 0, "failed": 0, "skipped": 0}
    for test in sorted(results):
        outcome, detail = results[test]
        want = table.get(test)
        problem = None
        if outcome == "skip" and detail.startswith(NETNS_SKIP):
            pass
        elif outcome == "pass" and want:
            problem = f"passes, but the table expects {want[0]}: remove its line"
        elif outcome in EXPECTABLE:
            if not want:
                problem = f"{outcome} ({detail}), not in the table"
            elif want[0] != outcome:
                problem = f"{outcome} ({detail}), the table expects {want[0]}"
            elif not want[1] or want[1].startswith(PLACEHOLDER):
                problem = f"the table gives no reason for its {outcome}"
        elif outcome == "error" and want and want[0] == "error":
            pass
        elif outcome != "pass":
            problem = outcome.upper() + (f" ({detail})" if detail else "")
        if problem:
            problems.append(f"{test}: {problem}")
            counts["failed"] += 1
        else:
            counts["passed" if outcome == "pass" else "skipped"] += 1
    if whole:
        for test in sorted(set(table) - set(results)):
            problems.append(f"{test}: in the table, but no such test ran")
    return problems, counts


def updated(results, table, whole):
    """The table rewritten from a run: reasons kept where the outcome stays, the placeholder
    for new lines, passing tests dropped; failures are never written."""
    new = {t: v for t, v in table.items() if t not in results and not whole}
    for test, (outcome, detail) in results.items():
        if outcome == "skip" and detail.startswith(NETNS_SKIP):
            if test in table:
                new[test] = table[test]
        elif outcome in EXPECTABLE:
            old = table.get(test)
            fresh = f"{PLACEHOLDER} (the test says: {detail})" if detail else PLACEHOLDER
            new[test] = (outcome, old[1] if old and old[0] == outcome else fresh)
        elif outcome == "error" and table.get(test, ("", ""))[0] == "error":
            new[test] = table[test]
    return new


# --selftest: a module of every outcome, run through rdma-core's own runner files.
SELFTEST_MODULE = """\
import os, signal, sys, time, unittest
class A(unittest.TestCase):
    def test_a_ok(self):
        pass
    def test_b_crash(self):
        \"\"\"A docstring line.\"\"\"
        os.kill(os.getpid(), signal.SIGSEGV)
    def test_c_noise(self):
        sys.stderr.write("noise ... \\n")
    def test_d_hang(self):
        time.sleep(600)
    def test_e_skip(self):
        raise unittest.SkipTest("because")
    def test_f_subtest(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertEqual(i, 0)
    @unittest.expectedFailure
    def test_g_xpass(self):
        pass
    def test_h_error(self):
        raise OSError("boom")
    @unittest.expectedFailure
    def test_z_xfail(self):
        self.fail()
class B(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise unittest.SkipTest("class skip")
    def test_x(self):
        pass
"""
SELFTEST_WANT = {
    "A.test_a_ok": "pass", "A.test_b_crash": "crash", "A.test_c_noise": "pass",
    "A.test_d_hang": "hang", "A.test_e_skip": "skip", "A.test_f_subtest": "fail",
    "A.test_g_xpass": "xpass", "A.test_h_error": "error", "A.test_z_xfail": "xfail",
    "B.test_x": "skip",
}


def selftest(args):
    """Run SELFTEST_MODULE with the runner files of --source and check every outcome, and the
    table's rules; 0 if all hold."""
    base = tempfile.mkdtemp(prefix="rdma-core-suite-selftest-")
    try:
        src = os.path.join(base, "src")
        os.makedirs(src)
        for name in ("__init__.py", "args_parser.py", "run_tests.py"):
            for cand in (name, name + ".gz"):
                if os.path.exists(os.path.join(args.source, cand)):
                    shutil.copy(os.path.join(args.source, cand), src)
        with gzip.open(os.path.join(src, "test_selftest.py.gz"), "wt") as f:
            f.write(SELFTEST_MODULE)
        args.scratch, args.timeout = os.path.join(base, "scratch"), 3
        tests_dir = unpack(src, args.scratch)
        os.makedirs(os.path.join(args.scratch, "logs"))
        listed = list_tests(args, tests_dir).get("test_selftest", [])
        got, _ = run_module(args, tests_dir, "test_selftest", listed)
        wrong = []
        for short, want in SELFTEST_WANT.items():
            outcome = got.get("tests.test_selftest." + short, ("missing", ""))[0]
            if outcome != want:
                wrong.append(f"{short}: {outcome}, not {want}")
        t = "tests.test_selftest."
        table = {t + "A.test_a_ok": ("skip", "stale"), t + "A.test_e_skip": ("skip", "why"),
                 t + "B.test_x": ("skip", PLACEHOLDER), t + "gone": ("skip", "why")}
        problems, counts = compare(got, table, whole=True)
        want_problems = {"A.test_a_ok", "A.test_b_crash", "A.test_d_hang", "A.test_f_subtest",
                         "A.test_g_xpass", "A.test_h_error", "A.test_z_xfail", "B.test_x", "gone"}
        flagged = {p.split(":")[0][len(t):] for p in problems}
        if flagged != want_problems or counts != {"passed": 1, "failed": 8, "skipped": 1}:
            wrong.append(f"compare: {sorted(flagged)} {counts}")
        new = updated(got, table, whole=True)
        if new.get(t + "A.test_e_skip") != ("skip", "why") or t + "A.test_a_ok" in new \
                or t + "gone" in new or not new.get(t + "A.test_z_xfail", ("", ""))[1].startswith(PLACEHOLDER):
            wrong.append(f"update: {new}")
        for w in wrong:
            print("selftest: " + w)
        print(f"selftest: {'ok' if not wrong else 'FAILED'} ({len(SELFTEST_WANT)} outcomes)")
        return 1 if wrong else 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help="test modules to run (default: every one)")
    ap.add_argument("--shim", default=os.path.join(ROOT, "target", "shim"))
    ap.add_argument("--source", default="/usr/share/doc/rdma-core/tests")
    ap.add_argument("--scratch", default=os.path.join(ROOT, "target", "rdma-core-tests"))
    ap.add_argument("--table", default=TABLE)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per module run")
    ap.add_argument("--python", default="/usr/bin/python3", help="a Python with pyverbs")
    ap.add_argument("--seed", default="1",
                    help="seed of the tests' random choices ('' leaves them unseeded)")
    ap.add_argument("--update", action="store_true", help="rewrite the table from this run")
    ap.add_argument("--selftest", action="store_true",
                    help="check the runner itself on a module of every outcome, and exit")
    args = ap.parse_args()
    args.shim = os.path.abspath(args.shim)
    args.scratch = os.path.abspath(args.scratch)
    if args.selftest:
        return selftest(args)

    if not os.path.isdir(args.source):
        sys.exit(f"{args.source} is missing: install python3-pyverbs (make deps)")
    if not os.path.exists(os.path.join(args.shim, "libibverbs.so.1")):
        sys.exit(f"{args.shim}/libibverbs.so.1 is missing: make shim")
    tests_dir = unpack(args.source, args.scratch)
    os.makedirs(os.path.join(args.scratch, "logs"))
    by_module = list_tests(args, tests_dir)
    modules = sorted(args.modules or by_module)
    unknown = [m for m in modules if m not in by_module]
    if unknown:
        sys.exit(f"no such test module: {' '.join(unknown)}")

    results = {}
    print(f"rdma-core's tests from {args.source} under {args.shim}")
    print(f"{'module':<24} {'pass':>4} {'fail':>4} {'err':>4} {'skip':>4} {'xfail':>5} "
          f"{'crash':>5} {'hang':>4}")
    for module in modules:
        got, runs = run_module(args, tests_dir, module, by_module[module])
        results.update(got)
        counts = {k: 0 for k in ("pass", "fail", "error", "skip", "xfail", "crash", "hang")}
        for outcome, _ in got.values():
            counts["fail" if outcome == "xpass" else outcome] += 1
        print(f"{module:<24} {counts['pass']:>4} {counts['fail']:>4} {counts['error']:>4} "
              f"{counts['skip']:>4} {counts['xfail']:>5} {counts['crash']:>5} {counts['hang']:>4}")
        for rc, hung, open_test in runs:
            if hung or rc < 0:
                how = "hung" if hung else f"was killed by {signal_name(-rc)}"
                print(f"    the run {how} in {open_test or 'no test'}")

    table, bad = read_table(args.table)
    problems, counts = compare(results, table, whole=not args.modules)
    problems = [f"malformed table line: {b}" for b in bad] + problems
    if args.update:
        new = updated(results, table, whole=not args.modules)
        write_table(args.table, new)
        print(f"wrote {args.table}: {len(new)} lines")

    if problems:
        print(f"\n{len(problems)} problem(s) (logs: {args.scratch}/logs):")
        for p in problems:
            print("  " + p)
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
