"""What margin does, for both front ends: the editor (margin.server.features) and the command line
(margin.server.cli) call these functions and only adapt their input and output.

Each function takes a manuscript, settings and an LLM client and returns domain results (reviews, rewrites, a lay
article, a transcript); none of them prints, speaks LSP or decides an exit status.
"""
