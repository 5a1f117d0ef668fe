from assembler.cli import script

script()
