#!/usr/bin/env python3
"""Generates the protobuf and gRPC stubs under src/raftlock/v1 from the
workspace's proto/ with grpcio-tools. `--check` regenerates into a temp dir
and fails if the committed stubs differ (CI runs it).

Generated code runs on the protobuf and grpcio it was generated with and on
every later release, never on an earlier one, so the stubs are made with
the oldest grpcio-tools of the range the package supports: run it in an
environment made from constraints-oldest.txt

    python3 -m venv /tmp/oldest
    /tmp/oldest/bin/pip install -c clients/python/constraints-oldest.txt \
        "./clients/python[test]" grpcio-tools
    /tmp/oldest/bin/python clients/python/scripts/generate.py
"""

from __future__ import annotations

import filecmp
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

# grpcio-tools' version, which is also the grpcio release the gRPC stubs
# need at least; keep it equal to the lower bound in pyproject.toml.
GENERATOR = "1.49.1"

HERE = Path(__file__).resolve().parents[1]
PROTO = HERE.parents[1] / "proto" / "proto"
FILES = ["raftlock_pb2.py", "raftlock_pb2.pyi", "raftlock_pb2_grpc.py"]


def generate(out: Path) -> None:
    args = [
        "protoc",
        f"-I{PROTO}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        "raftlock/v1/raftlock.proto",
    ]
    if protoc.main(args) != 0:
        sys.exit("protoc failed")


def main() -> None:
    from importlib.metadata import version

    found = version("grpcio-tools")
    if found != GENERATOR:
        sys.exit(
            f"grpcio-tools {found} found; the stubs are generated with {GENERATOR}, the oldest"
            " the package supports (see this script's docstring)"
        )
    target = HERE / "src"
    if "--check" not in sys.argv:
        generate(target)
        print(f"generated {', '.join(FILES)} in {target / 'raftlock' / 'v1'}")
        return
    with tempfile.TemporaryDirectory() as d:
        generate(Path(d))
        stale = [
            f
            for f in FILES
            if not filecmp.cmp(Path(d) / "raftlock" / "v1" / f, target / "raftlock" / "v1" / f, shallow=False)
        ]
    if stale:
        sys.exit(f"stale stubs: {', '.join(stale)}; run clients/python/scripts/generate.py")
    print("stubs are current")


if __name__ == "__main__":
    main()
