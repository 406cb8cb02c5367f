"""The review of a change (`fabric plan --base REV`): the base revision checked out (`revision`), the
change planned against it (`base`), what moves (`diff`), what `weights.lock` pins differently
(`weights_diff`), what restarts and in which waves (`rollout`, surge replicas in `rollout_room`), and the
review's tables (`rollout_report`, `report`). Sits above the plan: the plan document knows nothing of it.
"""
