"""Which AllReduce fusion split hides the most communication? ResNet-50 on 8 devices.

Runs ResNet-50 (batch 32 per device, loop sink) on one server of eight Ascend 910s with no
split (one AllReduce after the backward pass, MindSpore's default), the seed's 85,160 and a few
others, and prints each split's step tail, step time and exposed communication per step.

    PYTHONPATH=build/python python3 examples/fusion_split_study.py
"""
import ascendsim

splits = [None, [85, 160], [60, 160], [119, 160], [40, 100, 160]]
result = ascendsim.sweep("resnet50", {"all_reduce_fusion": splits}, strategies=["loop-sink"], devices=8,
                         batch_size=32, steps_per_epoch=60)
print(f"{'all_reduce_fusion':>18}  {'tail ms':>8}  {'step ms':>8}  {'exposed comm ms/step':>21}")
for point, report in zip(result.points, result.reports()):
    run = report.runs[0]
    split = point["point"]["all_reduce_fusion"]
    name = "one group" if split is None else ",".join(map(str, split))
    exposed = 1e3 * run["breakdown_s"]["comm"] / run["steps"]
    print(f"{name:>18}  {run['step_trace_ms']['tail']['p50']:8.3f}  {run['step_time_ms']['p50']:8.3f}  {exposed:21.3f}")
