"""A sink-size sweep of LeNet-5 under loop sink on a local Dask cluster.

Starts a LocalCluster of two worker processes (one simulation at a time each), runs loop sink at
eleven sink sizes from 1 to 1,875 steps per launch — each for the same 3,750 steps (two epochs: a
sweep's sink_size keeps the training and changes the sink, 3750 / sink_size launches) — as tasks
on it, and prints the step time and the device's busy share of each; the points come back in the
order given, as a local run would give them.
For a cluster of machines, pass Client("tcp://scheduler:8786") instead (docs/python.md).

    PYTHONPATH=build/python python3 examples/sink_size_sweep_dask.py
"""
from distributed import Client, LocalCluster

import ascendsim

if __name__ == "__main__":
    sizes = [1, 2, 5, 10, 25, 50, 125, 250, 625, 1250, 1875]
    grid = {"sink_size": sizes}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        result = ascendsim.sweep("lenet5", grid, strategies=["loop-sink"], epochs=2, client=client)
    print(f"{'sink_size':>9}  {'ms/step':>8}  {'samples/s':>10}  {'device busy':>11}")
    for row in result.rows():
        print(f"{row['sink_size']:>9}  {row['step_ms_mean']:8.4f}  {row['samples_per_s']:10.0f}  "
              f"{100 * row['device_busy_fraction']:10.1f}%")
    assert not result.failed, result.failed
