"""The command layer: each command's arguments read once, here, into the typed settings the packages
below take (docs/glossary.md: command layer). Nothing below it parses an override's text."""
