"""The book's figures: one module of diagrams per chapter, and the style they share.

``style`` holds the visual language (colours by role and head, sizes, drawing helpers);
``heatmaps`` the attention heatmaps; ``ch1`` ... ``ch7`` each chapter's diagrams. Every module
imports matplotlib, so nothing here is imported until a chapter draws; chapters import the
figures through ``attention_from_scratch.plotting`` and ``attention_from_scratch.diagrams``.
"""
