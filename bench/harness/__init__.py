"""Benchmark harness: three configurations of the same model, one kernel treatment.

Modules (one concept each):

* ``models``  - which benchmark models exist and how to build them (ONNX);
* ``configs`` - the three graph-level configurations, each ``IRModule -> IRModule``;
* ``compile`` - the kernel treatment shared by all configurations (default
  lowering, or MetaSchedule with one trial budget), kernel counting;
* ``measure`` - interleaved timing rounds, medians, numerics, onnxruntime reference;
* ``env``     - machine, versions, peak memory;
* ``report``  - JSON result file, PNG chart, markdown table and README markers.
"""
