"""The seed's three ways of calling data_sink for ten epochs of LeNet-5, simulated.

MindSpore's tutorial (seed 000) trains LeNet-5 for ten epochs with
``data_sink(train_step, dataset, sink_size=..., jit_config=JitConfig())`` called
  1. once per step (sink_size 1, 18,750 calls),
  2. once per epoch (sink_size = the dataset's 1,875 steps, ten calls),
  3. once for all ten epochs (sink_size = 18,750, one call),
which the simulator runs as loop sink with that many steps per launch. Prints each pattern's step
time and where the time goes, and plots the step times to data_sink_patterns.png.

    PYTHONPATH=build/python python3 examples/data_sink_patterns.py
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import ascendsim  # noqa: E402

STEPS = 1875  # 60,000 images at batch 32
EPOCHS = 10
patterns = {
    "sink_size 1 (18,750 calls)": dict(sink_size=1, epochs=STEPS * EPOCHS),
    "one epoch per call (10 calls)": dict(sink_size=STEPS, epochs=EPOCHS),
    "ten epochs in one call": dict(sink_size=STEPS * EPOCHS, epochs=1),
}
step_ms = {}
for name, kw in patterns.items():
    run = ascendsim.train("lenet5", dataset_sink_mode=True, **kw).runs[0]
    step_ms[name] = run["step_time_ms"]["mean"]
    launches = run["interactions"]["graph_launches"]
    host = sum(v for k, v in run["breakdown_s"].items() if k not in ("device_compute", "wait_data"))
    print(f"{name:32s} {run['steps']:6d} steps  {step_ms[name]:.4f} ms/step  {launches:6d} graph launches  "
          f"host-side time {host:.3f} s of {run['sim_time_s']:.3f} s")

fig, ax = plt.subplots(figsize=(7, 3))
ax.barh(list(step_ms), list(step_ms.values()), color="#0072B2")
ax.set_xlabel("mean step time (ms)")
ax.set_title("LeNet-5, ten epochs: data_sink call patterns")
fig.tight_layout()
fig.savefig("data_sink_patterns.png", dpi=100)
print("wrote data_sink_patterns.png")
