"""Single-idea helpers the rest of tasksapp builds on, each knowing nothing of the others: database
connections that survive a lost server or a client that left (`connections`), encryption and
fingerprints of secrets at rest (`crypto`), and servers' markdown as sanitised HTML (`markdown`).
"""
