#!/usr/bin/env -S /usr/bin/python3
"""The test bed's ssh (Open MPI's plm_rsh_agent): `agent.py HOST CMD...`
runs CMD on test-bed host HOST (a name or address from the test bed's
hosts file) by entering its namespaces, as ssh logs into a host and hands
the command line to the remote shell; HCTB_STATE names the test bed.
"""
import os
import sys


def main():
    args = sys.argv[1:]
    while args and args[0].startswith("-"):  # ssh options Open MPI may add (-x)
        args = args[1:]
    if len(args) < 2:
        sys.stderr.write("agent.py: usage: agent.py HOST COMMAND...\n")
        return 255
    host, command = args[0], args[1:]
    state = os.environ.get("HCTB_STATE", "")
    names = {}
    with open(os.path.join(state, "hosts")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                names[parts[0]] = parts[1]
    host = names.get(host, host)
    pidfile = os.path.join(state, host + ".pid")
    if not os.path.exists(pidfile):
        sys.stderr.write("agent.py: %s: no such test-bed host\n" % host)
        return 255
    with open(pidfile) as f:
        pid = f.read().strip()
    # As ssh does: the remote shell runs the command line it is given, in
    # the host's root (-r: the test bed's, a chroot's where it runs in one).
    os.execvp("nsenter", ["nsenter", "-t", pid, "-n", "-u", "-m", "-r", "--",
                          "/bin/sh", "-c", " ".join(command)])


if __name__ == "__main__":
    sys.exit(main())
