"""The evalsite engine: plain Python, no Django.

suite text -> loader.load_suite -> schema.Suite -> conversation.run_eval (per eval, with a chat client)
-> results.TurnRecord events and an EvalResult. Celery tasks, views, the CLI and the API wrap this.
"""
