"""pyverbs under the shim: every pyverbs module imports (so every symbol it references
resolves), and an Mlx5Context with DEVX creates an Mlx5Mkey whose max_entries is rounded up."""
import importlib
import pkgutil
import sys

import pyverbs

failed = []
names = [m.name for m in pkgutil.walk_packages(pyverbs.__path__, "pyverbs.")]
for name in names:
    try:
        importlib.import_module(name)
    except Exception as e:  # an unresolved symbol raises ImportError
        failed.append(f"{name}: {e}")
if failed or len(names) < 20:
    sys.exit("FAIL: imports: " + "; ".join(failed or [f"only {len(names)} modules"]))

import pyverbs.providers.mlx5.mlx5_enums as e
from pyverbs.device import get_device_list
from pyverbs.pd import PD
from pyverbs.providers.mlx5.mlx5dv import Mlx5Context, Mlx5DVContextAttr
from pyverbs.providers.mlx5.mlx5dv_mkey import Mlx5Mkey

devices = [d.name.decode() for d in get_device_list()]
if not devices:
    print("SKIP: no RDMA device")
    sys.exit(77)
ctx = Mlx5Context(Mlx5DVContextAttr(e.MLX5DV_CONTEXT_FLAGS_DEVX), name=devices[0])
pd = PD(ctx)
mkey = Mlx5Mkey(pd, e.MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 5)
if mkey.max_entries != 8:
    sys.exit(f"FAIL: Mlx5Mkey(max_entries=5).max_entries is {mkey.max_entries}, expected 8")
mkey.close()
pd.close()
ctx.close()
print(f"PASS: {len(names)} modules imported; Mlx5Mkey on {devices[0]} has max_entries 8")
