"""Notebook views: the graph widget, the node inspector, plots.

So far this holds the plots (``plots.py``); the GraphView lands with the widgets issue.
"""
