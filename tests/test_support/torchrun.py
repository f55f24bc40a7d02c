#!/usr/bin/python3
"""torchrun for the tests: `python3 torchrun.py ARGS...` is `torchrun ARGS...`.

Debian's python3-torch 1.13 torchrun fails at start on Python 3.11 (AttributeError in
multiprocessing.api.to_map): Std.from_str finds no member for "0" because Python 3.11 no longer
lists a zero-valued IntFlag member when iterating the class. torch 2.x fixed it. This wrapper
replaces that one function at import time, only when it is broken, and leaves the system's
files alone; then it runs torch.distributed.run's main as the torchrun script does.
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(cls, vm):
    if re.match(api._VALUE_REGEX, vm):
        return cls(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


if api.Std.from_str("0") is None:
    api.Std.from_str = classmethod(_from_str)

from torch.distributed.run import main  # noqa: E402  (after the fix)

if __name__ == "__main__":
    sys.exit(main())
