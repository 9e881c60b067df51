"""``python -m jepsen.hosts cleanup [--force]``: remove what crashed runs left behind."""

from __future__ import annotations

import argparse
import sys

from jepsen.hosts._system import cleanup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jepsen.hosts")
    sub = parser.add_subparsers(dest="command", required=True)
    clean = sub.add_parser("cleanup", help="remove namespaces, links and nftables tables of "
                                           "runs whose harness is gone")
    clean.add_argument("--force", action="store_true",
                       help="also remove resources of runs whose harness still runs")
    args = parser.parse_args(argv)
    removed = cleanup(force=args.force)
    for line in removed:
        print(f"removed {line}")
    if not removed:
        print("nothing to clean up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
