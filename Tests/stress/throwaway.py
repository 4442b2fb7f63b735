"""A throwaway default keychain in a private HOME, for the stress drivers that run the tools."""
import contextlib, os, shutil, subprocess, tempfile


@contextlib.contextmanager
def throwaway_keychain(bin, name):
    """Yields the environment to run the tools in; the keychain (and its kernel keys) and the
    HOME are removed afterwards, whatever happened."""
    home = tempfile.mkdtemp(prefix=f"keychain-{name}-")
    env = {**os.environ, "HOME": home, "XDG_DATA_HOME": home + "/data", "XDG_CONFIG_HOME": home + "/config"}
    env.pop("KEYCHAIN_PATH", None)
    security = bin + "/security"
    try:
        assert subprocess.run([security, "create-keychain", name], input=f"{name} password\n".encode(), env=env).returncode == 0
        assert subprocess.run([security, "default-keychain", "-s", name], env=env).returncode == 0
        yield env
    finally:
        subprocess.run([security, "delete-keychain", name], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
