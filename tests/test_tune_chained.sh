#!/bin/sh
# tests/test_tune_chained.sh - test_tune's chained-vs-unchained case alone, for the subgroup
# sweep (tests/run_subgroups.sh): the chained decode (--layer-chain on; the default on lavapipe,
# the tuner's choice where faster) must give the unchained logits bit for bit at every subgroup size, not
# only at lavapipe's default 8 lanes.
B=${B:-build}
TEST_FILTER=test_chained_tiny exec "$B/tests/test_tune"
