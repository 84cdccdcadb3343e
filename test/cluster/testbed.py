#!/usr/bin/env -S /usr/bin/python3
"""A cluster of hosts on one machine (issue 54): each host a network
namespace with its own hostname (UTS namespace) and /dev/shm (mount
namespace), joined by veth links to a bridge in a switch namespace of its
own, addresses from TEST-NET-1 (192.0.2.0/24, documentation only), each
link shaped: bandwidth with tc tbf, loss with iptables' statistic match,
delay with tc netem (where the kernel has sch_netem). Needs root.

    with TestBed(work, hosts=2, rate="10gbit", loss="10%") as tb:
        tb.run("h1", ["hostname"])          # a command on host h1
        tb.mpirun(["h0", "h1"], ["hc-run", ...])

mpirun runs on h0 and starts its daemons on the other hosts through
agent.py (Open MPI's plm_rsh_agent), which enters a host's namespaces as
ssh would log into it. Everything is torn down on exit, on an exception
and on SIGTERM/SIGINT; `leftovers()` lists what would remain.

Command line (cleaning up by hand): testbed.py down | leftovers.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "hctb"          # every namespace and link the test bed makes
SUBNET = "192.0.2."      # TEST-NET-1 (RFC 5737): never routed
MAX_HOSTS = 4
OMPI_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def sh(args, check=True, **kw):
    """An external command from an argument vector (never a shell)."""
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), p.returncode,
                                                (p.stderr or p.stdout).strip()[-500:]))
    return p


def rate_bytes(rate):
    """tc's "10gbit", "1gbit", "500mbit" in bytes per second."""
    units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3, "bit": 1}
    for u, f in units.items():
        if rate.endswith(u):
            return int(float(rate[:-len(u)]) * f / 8)
    raise ValueError("rate %r: give NUMBER gbit|mbit|kbit" % rate)


def host_name(i):
    return "h%d" % i


def host_ip(i):
    return SUBNET + str(10 + i)


def leftovers():
    """Namespaces, links and holder processes of a test bed still present."""
    out = []
    ns = sh(["ip", "netns", "list"]).stdout.split("\n")
    out += ["netns " + n.split()[0] for n in ns if n.startswith(PREFIX)]
    links = sh(["ip", "-o", "link", "show"]).stdout.split("\n")
    out += ["link " + l.split(":")[1].strip().split("@")[0]
            for l in links if l.count(":") >= 2 and l.split(":")[1].strip().startswith(PREFIX)]
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read().split(b"\0")
            except OSError:
                continue
            if any(c.endswith(b"holder.py") for c in cmd):
                out.append("holder process %s" % pid)
                continue
            # Anything the test bed started (ranks, mpirun, Slurm's and
            # munge's daemons) carries HCTB_STATE in its environment.
            try:
                with open("/proc/%s/environ" % pid, "rb") as f:
                    if b"\0HCTB_STATE=" in b"\0" + f.read():
                        out.append("process %s (%s)" % (pid, os.path.basename(cmd[0].decode())))
            except OSError:
                pass
    return out


class TestBed:
    def __init__(self, work, hosts=2, rate=None, delay=None, loss=None):
        if not 1 <= hosts <= MAX_HOSTS:
            raise ValueError("hosts must be 1..%d" % MAX_HOSTS)
        self.work = os.path.abspath(work)
        self.state = os.path.join(self.work, "testbed")
        # Each host mounts a tmpfs of its own here: the host's /tmp.
        self.tmp = os.path.join(self.state, "tmp")
        self.n = hosts
        self.shape = (rate, delay, loss)
        self.holders = {}

    # ------------------------------------------------------------- set-up
    def __enter__(self):
        self._old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
        for s in self._old:
            signal.signal(s, self._on_signal)
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()
        for s, h in self._old.items():
            signal.signal(s, h)
        return False

    def _on_signal(self, sig, frame):
        self.down()
        raise SystemExit(128 + sig)

    def up(self):
        if leftovers():
            raise RuntimeError("a test bed is still up (%s); run testbed.py down" % leftovers()[0])
        shutil.rmtree(self.state, ignore_errors=True)
        os.makedirs(self.tmp)
        with open(os.path.join(self.state, "hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n")
            for i in range(self.n):
                f.write("%s %s\n" % (host_ip(i), host_name(i)))
        sw = PREFIX + "-sw"
        sh(["ip", "netns", "add", sw])
        sh(["ip", "-n", sw, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", sw, "link", "set", "br0", "up"])
        for i in range(self.n):
            self._add_host(i, sw)
        self.set_link_shape(*self.shape)

    def _add_host(self, i, sw):
        name, ns = host_name(i), "%s-%s" % (PREFIX, host_name(i))
        end, peer = "%s-%s" % (PREFIX, name), "%s-%sp" % (PREFIX, name)
        sh(["ip", "netns", "add", ns])
        sh(["ip", "link", "add", end, "type", "veth", "peer", "name", peer])
        sh(["ip", "link", "set", end, "netns", ns])
        sh(["ip", "link", "set", peer, "netns", sw])
        sh(["ip", "-n", ns, "link", "set", end, "name", "eth0"])
        sh(["ip", "-n", ns, "addr", "add", host_ip(i) + "/24", "dev", "eth0"])
        sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
        sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        # A host's TCP gives up on unanswered data after ~6 s (Linux's
        # default, 15 retries, is ~15 minutes): so mpirun, tearing down a
        # job whose far daemon is gone, ends instead of retrying for long.
        sh(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.tcp_retries2=5"])
        sh(["ip", "-n", sw, "link", "set", peer, "master", "br0"])
        sh(["ip", "-n", sw, "link", "set", peer, "up"])
        # The host's own hostname and /dev/shm: a holder process in new UTS
        # and mount namespaces inside the network one, entered by nsenter.
        pidfile = os.path.join(self.state, name + ".pid")
        holder = subprocess.Popen(
            ["ip", "netns", "exec", ns, "unshare", "--uts", "--mount", "--propagation", "private",
             "--", sys.executable, os.path.join(HERE, "holder.py"), name, pidfile,
             os.path.join(self.state, "hosts"), self.tmp],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(200):
            if os.path.exists(pidfile) or holder.poll() is not None:
                break
            time.sleep(0.02)
        if not os.path.exists(pidfile):
            err = holder.stderr.read().decode() if holder.poll() is not None else "timeout"
            raise RuntimeError("host %s: the namespace holder did not start: %s" % (name, err))
        self.holders[name] = holder

    def set_link_shape(self, rate=None, delay=None, loss=None):
        """Shapes every host's eth0 (egress): `rate` ("10gbit") with a token
        bucket (tc tbf); `loss` ("10%") drops that share of the packets a
        host sends at random (iptables' statistic match); `delay` ("50us")
        needs tc netem, which a kernel without sch_netem refuses (named in
        the error)."""
        self.shape = (rate, delay, loss)
        for i in range(self.n):
            ns = "%s-%s" % (PREFIX, host_name(i))
            tc = ["ip", "netns", "exec", ns, "tc", "qdisc"]
            sh(tc + ["del", "dev", "eth0", "root"], check=False)
            if delay:
                p = sh(tc + ["add", "dev", "eth0", "root", "handle", "1:", "netem", "delay",
                             delay], check=False)
                if p.returncode != 0:
                    raise RuntimeError("tc netem delay %s: %s (this kernel has no sch_netem)"
                                       % (delay, p.stderr.strip()))
            if rate:
                parent = ["parent", "1:1"] if delay else ["root"]
                # A burst of 1 ms at the rate (at least 64 KiB), queue <= 10 ms.
                sh(tc + ["add", "dev", "eth0"] + parent + ["tbf", "rate", rate, "burst",
                         str(max(65536, rate_bytes(rate) // 1000)), "latency", "10ms"])
            ipt = ["ip", "netns", "exec", ns, "iptables", "-w"]
            sh(ipt + ["-F", "OUTPUT"])
            if loss:
                share = float(loss.rstrip("%")) / 100
                if not 0 < share < 1:
                    raise ValueError("loss %r: give a percentage between 0 and 100" % loss)
                sh(ipt + ["-A", "OUTPUT", "-o", "eth0", "-m", "statistic", "--mode", "random",
                          "--probability", "%.6f" % share, "-j", "DROP"])

    def set_link(self, host, up):
        """Cuts (up=False) or restores a host's link."""
        sh(["ip", "-n", "%s-%s" % (PREFIX, host), "link", "set", "eth0", "up" if up else "down"])

    def kill_host(self, host):
        """Kills every process on `host` but its namespace holder (a host
        whose processes died: its daemon and ranks)."""
        holder = self.pid(host)
        pids = sh(["ip", "netns", "pids", "%s-%s" % (PREFIX, host)]).stdout.split()
        for pid in pids:
            if int(pid) != holder:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
        return len(pids) - 1

    def wait_ended(self, host, program, timeout=30):
        """Waits until no `program` process runs on `host`; returns the pids
        of those still running after `timeout` s (mpirun may end before the
        ranks it aborts have exited, and a rank that lives on still holds
        what it locked)."""
        deadline = time.monotonic() + timeout
        while True:
            alive = []
            for pid in sh(["ip", "netns", "pids", "%s-%s" % (PREFIX, host)]).stdout.split():
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        exe = f.read().split(b"\0")[0]
                except OSError:
                    continue
                if os.path.basename(exe.decode(errors="replace")) == program:
                    alive.append(int(pid))
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.1)

    # -------------------------------------------------------------- running
    def pid(self, host):
        with open(os.path.join(self.state, host + ".pid")) as f:
            return int(f.read())

    def enter(self, host, cwd=None):
        """The command prefix that runs in `host`'s namespaces. -r keeps the
        caller's root (a chroot's, as in tools/fresh-machine.sh: entering a
        mount namespace alone resets it to the namespace's /) and --wd its
        working directory."""
        return ["nsenter", "-t", str(self.pid(host)), "-n", "-u", "-m", "-r",
                "--wd=" + os.path.abspath(cwd or os.getcwd()), "--"]

    def env(self, extra=None):
        e = dict(os.environ, HCTB_STATE=self.state, **OMPI_ROOT)
        e.update(extra or {})
        return e

    def run(self, host, args, **kw):
        """A command on `host` (its namespaces), from an argument vector."""
        env = self.env(kw.pop("env", None))
        return subprocess.run(self.enter(host, kw.pop("cwd", None)) + args, env=env, **kw)

    def mpirun_args(self, hosts, np_per_host=1):
        """mpirun on the first host, ranks on `hosts`, TCP between hosts
        over the shaped links, shared memory inside a host."""
        hostfile = os.path.join(self.state, "hostfile-%s-%d" % ("-".join(hosts), np_per_host))
        with open(hostfile, "w") as f:
            f.write("".join("%s slots=%d\n" % (h, np_per_host) for h in hosts))
        return ["mpirun", "--allow-run-as-root", "--hostfile", hostfile, "-np",
                str(np_per_host * len(hosts)), "--bind-to", "none",
                "--mca", "plm_rsh_agent", os.path.join(HERE, "agent.py"),
                "--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", "eth0",
                "--mca", "oob_tcp_if_include", "eth0",
                # mpirun notices a daemon whose host went away in ~10 s,
                # not Linux's default 2 h of TCP keepalive (Open MPI: 300 s
                # + 9 x 20 s).
                "--mca", "oob_tcp_keepalive_time", "5", "--mca", "oob_tcp_keepalive_intvl", "1",
                "--mca", "oob_tcp_keepalive_probes", "5"]

    def mpirun(self, hosts, args, np_per_host=1, **kw):
        return self.run(hosts[0], self.mpirun_args(hosts, np_per_host) + args, **kw)

    # ------------------------------------------------------------- tear-down
    def down(self):
        for name in list(self.holders) + [host_name(i) for i in range(self.n)]:
            try:
                os.kill(self.pid(name), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        for h in self.holders.values():
            try:
                h.wait(timeout=10)
            except subprocess.TimeoutExpired:
                h.kill()
        self.holders = {}
        down_all()
        shutil.rmtree(self.state, ignore_errors=True)


def down_all():
    """Removes every namespace of a test bed (and with them their links)."""
    for entry in sh(["ip", "netns", "list"], check=False).stdout.split("\n"):
        if entry.startswith(PREFIX):
            ns = entry.split()[0]
            # Processes still inside (a rank, a daemon) die with the host.
            for pid in sh(["ip", "netns", "pids", ns], check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            sh(["ip", "netns", "del", ns], check=False)
    for line in sh(["ip", "-o", "link", "show"], check=False).stdout.split("\n"):
        if line.count(":") >= 2:
            link = line.split(":")[1].strip().split("@")[0]
            if link.startswith(PREFIX):
                sh(["ip", "link", "del", link], check=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=["down", "leftovers"])
    a = ap.parse_args()
    if a.action == "down":
        down_all()
    left = leftovers()
    print("\n".join(left) if left else "nothing left")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
