#!/usr/bin/env -S /usr/bin/python3
"""Holds one test-bed host's namespaces open (testbed.py starts it inside
the host's network namespace, in new UTS and mount namespaces): sets the
hostname, mounts a /dev/shm and a temporary directory of the host's own
(TMPDIR: a real host's /tmp, where Slurm's PMIx server keeps its sockets)
and the test bed's /etc/hosts, writes its pid (what nsenter enters) and
waits for SIGTERM.

usage: holder.py HOSTNAME PIDFILE HOSTS_FILE TMPDIR
"""
import os
import signal
import socket
import subprocess
import sys


def main():
    name, pidfile, hosts, tmpdir = sys.argv[1:5]
    socket.sethostname(name)
    for args in (["mount", "-t", "tmpfs", "-o", "size=2g,mode=1777", "tmpfs", "/dev/shm"],
                 ["mount", "-t", "tmpfs", "-o", "size=1g,mode=1777", "tmpfs", tmpdir],
                 ["mount", "--bind", hosts, "/etc/hosts"]):
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write("%s: %s\n" % (" ".join(args), p.stderr.strip()))
            return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tmp = pidfile + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(os.getpid()))
    os.rename(tmp, pidfile)
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
