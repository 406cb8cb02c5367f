"""Parsers for what GPU tools print. Each one takes the text and the command that printed it.

Every parser either returns a model or raises `ParseError` naming the command and what was
wrong; a parser never lets another exception out (the hypothesis tests feed them garbage).
"""
