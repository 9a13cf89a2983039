"""Code graders: a program (any language) or a Python callable from the suite's folder grades a reply.

`dialects` says how the conversation is handed over and the answer read, one entry per tool's convention;
`sandbox` runs the grader in a subprocess with a time limit, a memory limit and, unless allowed, no network.
"""
