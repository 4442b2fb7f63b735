"""Writes a KWallet .kwl file whose names its author chose (escape sequences in a folder or a
key): format 0.0, the SHA-1 key, so no .salt is needed; Tests/kde/kwl-legacy-writer.py's writer.
Usage: crafted_kwl.py OUTPUT PASSWORD FOLDER KEY VALUE
"""
import importlib.util, os, sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("kwl_writer", os.path.join(here, "..", "kde", "kwl-legacy-writer.py"))
writer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(writer)
out, password, folder, key, value = sys.argv[1:6]
writer.write(out, password.encode(), {folder: {key: (1, writer.qstring(value))}})
