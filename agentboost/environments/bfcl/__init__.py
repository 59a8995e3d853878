"""The Berkeley Function-Calling Leaderboard through the installed ``bfcl-eval`` package: its data
and BFCL's checkers (``package``), task rows (``tasks``: ``data prepare bfcl``), function docs as
Strands tools and the executable API classes one episode acts on (``tools``), BFCL's inference
protocol as a conversation (``conversation``) and BFCL's scoring of an episode (``scoring``)."""
