"""The small two-group fleet file that the comparison tests share (test_compare, test_effects,
test_audit_new_code): a few jobs, a short horizon, so that one compiled shape serves them all."""

SMALL = """
throughput = [1.0, 2.0, 3.0, 4.0, 5.0]

[design]
horizon = 300.0

[[groups]]
name = "a"
count = 3
size = 1
write = 0.1
mtbf = 40.0
restart = 8.0
compute = 1.0

[[groups]]
name = "b"
count = 2
size = 2
write = 0.2
mtbf = 60.0
restart = 4.0
compute = 2.0
"""
