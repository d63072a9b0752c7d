"""The verifiers plugin id `tsbench-verifiers` (verifiers imports a plugin by its id as a top-level
package): tsbench's task families as verifiers environments, defined in tsbench.interop.verifiers_env.

    vf-eval tsbench-verifiers --env.taskset.family anomalyxl --env.taskset.source stream --env.group-size 8
        --env.agent.runtime.type subprocess --env.agent.harness.play rlm ...
"""

from tsbench.interop.verifiers_env import (
    TsbenchEnv,
    TsbenchHarness,
    TsbenchTaskset,
    environment_config,
    load_environment,
)

__all__ = ["TsbenchEnv", "TsbenchHarness", "TsbenchTaskset", "environment_config", "load_environment"]
