"""Command-line conventions shared by the models/ scripts: a bad flag or bad
input is one line on stderr, prefixed with the script's name, and exit code 2."""
import argparse
import os
import sys

PROG = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "models"


def fail(msg, code=2):
    sys.stderr.write("%s: error: %s\n" % (PROG, msg))
    sys.exit(code)


class Parser(argparse.ArgumentParser):
    def error(self, message):
        fail(message)
