#!/usr/bin/env python3
"""Turns bench/run.sh's measurements into one table: our figure, the peer's, the ratio, the bar.

Usage: report.py WORK STORE_ITEMS GNOME_ITEMS BIG NOTE [--readme bench/README.md]...

Prints the table. With --readme it also writes it into that file (each one named), between the two marker lines
(BEGIN and END below), and keeps everything else of the file as it is: the prose around the table
(how to read it, the misses) is written by hand and must survive every `make bench`.
"""
import json, os, statistics, sys

BEGIN = "<!-- make bench writes the table from here (bench/report.py); edit the text around it, not this -->"
END = "<!-- end of the table make bench writes -->"

args = sys.argv[1:]
readmes = []
while "--readme" in args:
    at = args.index("--readme")
    readmes.append(args[at + 1])
    del args[at:at + 2]
work, store_items, gnome_items, big, note = args[0], int(args[1]), int(args[2]), int(args[3]), args[4]
proc = json.load(open(os.path.join(work, "process.json")))
ms = lambda name: proc[name]["median_ms"]
rounds = proc["helper/keychain"]["runs"]


def kv(path):
    values = {}
    if os.path.exists(path):
        for line in open(path):
            key, value = line.split()
            values[key] = float(value)
    return values


inproc = {**kv(os.path.join(work, "small.txt")), **kv(os.path.join(work, "big.txt"))}
rss = {r["figure"]: r["ours"] for r in map(json.loads, open(os.path.join(work, "results.jsonl")))}

rows = []  # (figure, ours, peer, ratio text, bar text, met)


def add(figure, ours, peer, ratio, bar, met):
    rows.append((figure, ours, peer, ratio, bar, "yes" if met else "**no**"))


r = ms("helper/keychain") / ms("helper/store")
add(f"git helper `get`, {store_items:,} items vs credential-store", f"{ms('helper/keychain'):.2f} ms",
    f"{ms('helper/store'):.2f} ms", f"{r:.2f}x", "<= 1.3x", r <= 1.3)
r = ms("helper/libsecret") / ms("helper/keychain")
add(f"git helper `get` vs libsecret + gnome-keyring ({gnome_items:,} items)", f"{ms('helper/keychain'):.2f} ms",
    f"{ms('helper/libsecret'):.2f} ms", f"{r:.1f}x faster", ">= 5x faster", r >= 5)
r = ms("fill/keychain") / ms("fill/store")
add("`git credential fill` vs credential-store", f"{ms('fill/keychain'):.2f} ms", f"{ms('fill/store'):.2f} ms",
    f"{r:.2f}x", "<= 1.1x", r <= 1.1)
r = ms("fill/libsecret") / ms("fill/keychain")
add("`git credential fill` vs libsecret", f"{ms('fill/keychain'):.2f} ms", f"{ms('fill/libsecret'):.2f} ms",
    f"{r:.1f}x faster", "(no bar)", True)
r = ms("docker/pass") / ms("docker/keychain")
add("docker helper `get` vs docker-credential-pass", f"{ms('docker/keychain'):.2f} ms", f"{ms('docker/pass'):.2f} ms",
    f"{r:.1f}x faster", ">= 10x faster", r >= 10)
r = ms("docker/secretservice") / ms("docker/keychain")
add("docker helper `get` vs docker-credential-secretservice", f"{ms('docker/keychain'):.2f} ms",
    f"{ms('docker/secretservice'):.2f} ms", f"{r:.1f}x faster", "(no bar)", True)

small, large, floor = inproc["small_lookup_us"], inproc["big_lookup_us"], inproc["big_floor_us"]
add(f"SecItemCopyMatching, {big:,} vs 1,000 items", f"{large:.1f} us", f"{small:.1f} us", f"{large / small:.2f}x",
    "<= 1.5x", large / small <= 1.5)
add(f"SecItemCopyMatching vs bare indexed SQLite select ({big:,} rows)", f"{large:.1f} us", f"{floor:.1f} us",
    f"{large / floor:.1f}x", "<= 2x", large / floor <= 2)
add_floor = inproc.get("big_add_floor_total_s")
add(f"SecItemAdd of {big:,} items, one call each, in all", f"{inproc['big_add_total_s']:.1f} s",
    f"{add_floor:.1f} s (bare SQLite)" if add_floor else "", f"{inproc['big_add_per_item_us']:.0f} us each",
    "< 5 s", inproc["big_add_total_s"] < 5)
if add_floor:
    add(f"bare SQLite inserts of {big:,} rows of the keychain's shape, one transaction each (the floor under one commit per add)",
        f"{add_floor:.1f} s", "", f"{add_floor / big * 1e6:.0f} us each", "(the floor)", True)
for op in ("update", "delete"):
    v = inproc[f"big_{op}_us"]
    add(f"SecItem{op.capitalize()} of one item among {big:,}", f"{v:.1f} us", f"{large:.1f} us (lookup)",
        f"{v / large:.1f}x", "same order (< 10x)", v / large < 10)

# The broker (bench/broker.sh): the same build's reads with the class keys in keychain-broker's
# keeping against the kernel keyring's, each a median of the runs' figures.
def kv_runs(path):
    """`name value` lines, a set per run: each name's median over the runs."""
    values = {}
    if os.path.exists(path):
        for line in open(path):
            key, value = line.split()
            values.setdefault(key, []).append(float(value))
    return {key: statistics.median(v) for key, v in values.items()}


broker_reads, kernel_reads = kv_runs(os.path.join(work, "broker-broker.txt")), kv_runs(os.path.join(work, "broker-kernel.txt"))
if broker_reads and kernel_reads:
    b, k = broker_reads["lookup_us"], kernel_reads["lookup_us"]
    add(f"SecItemCopyMatching returning data through keychain-broker vs the kernel keyring's custody ({store_items:,} items, same build)",
        f"{b:.1f} us", f"{k:.1f} us", f"{b / k:.2f}x", "<= 1.5x", b / k <= 1.5)
    floor = kv_runs(os.path.join(work, "broker-floor.txt"))
    if floor:
        f, rt = floor["floor_us"], floor["floor_roundtrip_us"]
        add("the floor under a read through any broker that checks its caller on every read: one round trip to another "
            f"process ({rt:.1f} us) and its read of the caller's /proc/PID/status (C, bench/broker_floor.c), added to the "
            "kernel keyring's figure", f"{k + f:.1f} us", f"{k:.1f} us", f"{(k + f) / k:.2f}x", "(the floor under the bar above)", True)
broker_helper = os.path.join(work, "broker-helper.json")
if os.path.exists(broker_helper):
    h = json.load(open(broker_helper))
    b, k, s = h["helper/broker"]["median_ms"], h["helper/kernel"]["median_ms"], h["helper/store"]["median_ms"]
    add(f"git helper `get` through keychain-broker, {store_items:,} items, vs credential-store", f"{b:.2f} ms", f"{s:.2f} ms",
        f"{b / s:.2f}x", "<= 1.3x", b / s <= 1.3)
    add("the same `get` through keychain-broker vs with its keys in the kernel keyring (what the broker adds to a process)",
        f"{b:.2f} ms", f"{k:.2f} ms", f"+{b - k:.2f} ms", "(no bar)", True)
if broker_reads and kernel_reads:
    b, k = broker_reads["reads_total_s"], kernel_reads["reads_total_s"]
    add(f"{store_items:,} items read in a row (SecItemCopyMatching each) by the program that made them, through keychain-broker, "
        "vs the kernel keyring's custody", f"{b:.2f} s", f"{k:.2f} s", f"{broker_reads['reads_per_item_us']:.0f} us each",
        "(a figure)", True)
elif os.path.exists(os.path.join(work, "broker-skipped.txt")):
    note = (note + " " if note else "") + open(os.path.join(work, "broker-skipped.txt")).read().strip()

# The broker's deputies (bench/broker-desktop.sh): one request through keychain-ssh-agent and
# keychain-secret-service with their keychain kept by keychain-broker, against the same build with
# the class keys in the kernel keyring; issue 55's bar, at most 0.2 ms more a request.
deputy_ssh = os.path.join(work, "broker-ssh.json")
if os.path.exists(deputy_ssh):
    t = json.load(open(deputy_ssh))
    b, k = t["sign/broker"]["median_ms"], t["sign/kernel"]["median_ms"]
    add("SSH signature by ssh-keygen (`ssh-keygen -Y sign`, on a new key's list) through keychain-ssh-agent, its keychain "
        "kept by keychain-broker vs in the kernel keyring (same build, whole commands)", f"{b:.2f} ms", f"{k:.2f} ms",
        f"{b - k:+.2f} ms", "<= +0.2 ms", b - k <= 0.2)
deputy_ss = [os.path.join(work, f"broker-ss-{custody}.txt") for custody in ("broker", "kernel")]
if all(map(os.path.exists, deputy_ss)):
    deputy_b, deputy_k = (statistics.median(float(x) for x in open(path)) for path in deputy_ss)
    add(f"the Secret Service's own lookup (SearchItems + GetSecrets on an open session) by the program that stored the item, "
        f"{store_items:,} items, through keychain-broker vs the kernel keyring's custody (same build)",
        f"{deputy_b / 1000:.2f} ms", f"{deputy_k / 1000:.2f} ms", f"{(deputy_b - deputy_k) / 1000:+.2f} ms", "<= +0.2 ms",
        deputy_b - deputy_k <= 200)
elif os.path.exists(os.path.join(work, "broker-desktop-skipped.txt")):
    note = (note + " " if note else "") + open(os.path.join(work, "broker-desktop-skipped.txt")).read().strip()

opens = [float(x) for x in open(os.path.join(work, "open.txt"))] if os.path.exists(os.path.join(work, "open.txt")) else []
scrypts = [float(x) for x in open(os.path.join(work, "scrypt.txt"))] if os.path.exists(os.path.join(work, "scrypt.txt")) else []
if opens and scrypts:
    o, k = statistics.median(opens), statistics.median(scrypts)
    add("unlock: PAM open_session vs its scrypt", f"{o:.1f} ms", f"{k:.1f} ms (scrypt)", f"{o - k:+.1f} ms",
        "scrypt at the N = 2^17 floor or more; + <= 20 ms", o - k <= 20)

tpm_unlock = os.path.join(work, "tpm-unlock.json")
if os.path.exists(tpm_unlock):
    t = json.load(open(tpm_unlock))
    sealed, plain = t["unlock/sealed"]["median_ms"], t["unlock/plain"]["median_ms"]
    add("`security unlock-keychain` sealed to a TPM (swtpm) vs the same scrypt cost without", f"{sealed:.1f} ms",
        f"{plain:.1f} ms", f"+{sealed - plain:.1f} ms", "+ <= 150 ms", sealed - plain <= 150)
    lockout = kv(os.path.join(work, "tpm-lockout.txt"))
    tries, maximum, interval = int(lockout["tries"]), int(lockout["maximum"]), int(lockout["interval"])
    per_day = 86400 / interval if interval else 0
    offline = 86400 / (plain / 1000)
    add("wrong passwords a TPM-sealed keychain allows (swtpm's lockout settings) vs guessing a copy without a TPM",
        f"{tries} tries, then 1 per {interval} s ({per_day:.0f} a day)", f"{offline:,.0f} a day per core (scrypt alone)",
        f"{offline / max(per_day, 1):,.0f}x fewer", "locked out after the TPM's maximum", tries == maximum)
elif os.path.exists(os.path.join(work, "tpm-skipped.txt")):
    note = (note + " " if note else "") + open(os.path.join(work, "tpm-skipped.txt")).read().strip()

ssh_sign = os.path.join(work, "ssh-sign.json")
if os.path.exists(ssh_sign):
    t = json.load(open(ssh_sign))
    ours_sign, openssh_sign = t["sign/ours"]["median_ms"], t["sign/openssh"]["median_ms"]
    add("SSH signature through keychain-ssh-agent vs OpenSSH's ssh-agent, same Ed25519 key (a whole `ssh-add -T`)",
        f"{ours_sign:.2f} ms", f"{openssh_sign:.2f} ms", f"{ours_sign / openssh_sign:.2f}x", "<= 1.5x",
        ours_sign / openssh_sign <= 1.5)
    if "sign/gnome" in t:
        gnome_sign = t["sign/gnome"]["median_ms"]
        add("the same vs gnome-keyring's SSH agent (gnome-keyring-daemon --components=ssh)", f"{ours_sign:.2f} ms",
            f"{gnome_sign:.2f} ms", f"{gnome_sign / ours_sign:.2f}x faster", "(no bar)", True)
    ssh_unload = os.path.join(work, "ssh-unload.json")
    if os.path.exists(ssh_unload):
        u = json.load(open(ssh_unload))
        ours_unload, openssh_unload = u["unload/ours"]["median_ms"], u["unload/openssh"]["median_ms"]
        add("five rounds of `ssh-add KEY` then `ssh-add -D` through keychain-ssh-agent vs ssh-agent (whole commands)",
            f"{ours_unload:.1f} ms", f"{openssh_unload:.1f} ms", f"{ours_unload / openssh_unload:.2f}x", "<= 1.5x",
            ours_unload / openssh_unload <= 1.5)
    ours_dirty, openssh_dirty = rss["ssh-Anonymous/ours"], rss["ssh-Anonymous/openssh"]
    add("private (anonymous) memory of the agent holding 20 keys, each used once, vs ssh-agent",
        f"{ours_dirty / 1024:.1f} MiB (PSS {rss['ssh-Pss/ours'] / 1024:.1f})",
        f"{openssh_dirty / 1024:.1f} MiB (PSS {rss['ssh-Pss/openssh'] / 1024:.1f})",
        f"{(ours_dirty - openssh_dirty) / 1024:+.1f} MiB", "<= ssh-agent + 2 MiB", ours_dirty <= openssh_dirty + 2048)
elif os.path.exists(os.path.join(work, "ssh-skipped.txt")):
    note = (note + " " if note else "") + open(os.path.join(work, "ssh-skipped.txt")).read().strip()

r = ms("service-lookup/gnome") / ms("service-lookup/ours")
add(f"`secret-tool lookup`, {gnome_items:,} items, keychain-secret-service vs gnome-keyring",
    f"{ms('service-lookup/ours'):.2f} ms", f"{ms('service-lookup/gnome'):.2f} ms", f"{r:.1f}x faster", "(no bar)", True)
floor = ms("service-lookup/none")
add("`secret-tool lookup` with no provider on the bus (its own start, libsecret, one refused call)",
    f"{floor:.2f} ms", f"{ms('service-lookup/gnome') / 3:.2f} ms (a third of gnome-keyring's lookup)", "",
    "(the floor under any provider)", True)
r = ms("service-store/gnome") / ms("service-store/ours")
add(f"`secret-tool store` of one item, {gnome_items:,} held, vs gnome-keyring",
    f"{ms('service-store/ours'):.2f} ms", f"{ms('service-store/gnome'):.2f} ms", f"{r:.1f}x faster", "(no bar)", True)


def median_of(name):
    """The median of a file of figures, one a line (None when the run made no such file)."""
    path = os.path.join(work, name)
    return statistics.median(float(x) for x in open(path)) if os.path.exists(path) else None


def provider(op, who):
    """The median of the alternated runs' medians (ss_client, microseconds)."""
    return median_of(f"provider-{op}-{who}.txt")


ours_p, gnome_p = provider("lookup", "ours"), provider("lookup", "gnome")
add(f"the provider's own lookup (SearchItems + GetSecrets on an open session), {gnome_items:,} items, vs gnome-keyring",
    f"{ours_p / 1000:.2f} ms", f"{gnome_p / 1000:.2f} ms", f"{gnome_p / ours_p:.1f}x faster", ">= 3x faster", gnome_p / ours_p >= 3)
big_p = provider("lookup", "big")
if big_p:
    add(f"the provider's own lookup, {store_items:,} items, vs gnome-keyring's at {gnome_items:,}",
        f"{big_p / 1000:.2f} ms", f"{gnome_p / 1000:.2f} ms", f"{gnome_p / big_p:.1f}x faster", ">= 3x faster", gnome_p / big_p >= 3)
ping_ours, ping_gnome = provider("ping", "ours"), provider("ping", "gnome")
if ping_ours and ping_gnome:
    add("two Peer.Ping round trips to the same provider on the same connection (its D-Bus library answers them)",
        f"{ping_ours / 1000:.2f} ms", f"{ping_gnome / 1000:.2f} ms", "", "(the floor under a lookup's two calls)", True)
    own_ours, own_gnome = ours_p - ping_ours, gnome_p - ping_gnome
    add(f"the provider's own lookup less that floor (what the provider's code adds), {gnome_items:,} items",
        f"{own_ours / 1000:.2f} ms", f"{own_gnome / 1000:.2f} ms", f"{own_gnome / own_ours:.1f}x faster", "(no bar)", True)
ours_p, gnome_p = provider("store", "ours"), provider("store", "gnome")
add(f"the provider's own store (CreateItem, replace), {gnome_items:,} held, vs gnome-keyring",
    f"{ours_p / 1000:.2f} ms", f"{gnome_p / 1000:.2f} ms", f"{gnome_p / ours_p:.1f}x faster", ">= 10x faster", gnome_p / ours_p >= 10)

# Bulk writes: 10,000 items in under 2 s, i.e. 0.2 ms an item.
many = provider("many", "ours")
if many:
    add(f"a Secret Service client storing {gnome_items:,} items in a row (CreateItem each, one connection)",
        f"{many / 1e6:.2f} s", "", f"{many / gnome_items / 1000:.2f} ms each", f"< {gnome_items * 0.2 / 1000:g} s (10,000 in < 2 s)",
        many / 1e6 < gnome_items * 0.2 / 1000)
pipelined = provider("pipelined", "ours")
if pipelined:
    add(f"the same {gnome_items:,} CreateItem calls sent without waiting for each answer (as libsecret's and GDBus's "
        "asynchronous calls send them): the calls waiting together share a commit",
        f"{pipelined / 1e6:.2f} s", "", f"{pipelined / gnome_items / 1000:.2f} ms each",
        f"< {gnome_items * 0.2 / 1000:g} s (10,000 in < 2 s)", pipelined / 1e6 < gnome_items * 0.2 / 1000)
for name, what in (("bulk-backup.txt", f"`security import` of a backup of {store_items:,} items (its scrypt included), into a new keychain"),
                   ("bulk-git.txt", f"`security import-secrets --git-credentials` of {store_items:,} credential-store lines, into a new keychain"),
                   ("bulk-keyring.txt", f"`security import-secrets --keyring` of a keyring file of {store_items:,} items of libsecret's "
                                        "generic schema, into the keychain it makes (its scrypt included)"),
                   ("bulk-alike.txt", f"`security import-secrets --keyring` of a keyring file of {store_items:,} look-alikes (one label "
                                      "and attribute set, a secret each), into the keychain it makes (its scrypt included)")):
    value = median_of(name)
    if value is not None:
        bar = store_items * 0.2 / 1000
        add(what, f"{value / 1000:.2f} s", "", f"{value / store_items * 1000:.0f} us each",
            f"< {bar:g} s", value / 1000 < bar)

if "import-gnome/ms" in rss:
    took = rss["import-gnome/ms"] / 1000
    add(f"`security import-secrets` of gnome-keyring's file of {gnome_items:,} items (read, decrypt, store)",
        f"{took:.2f} s", "", f"{took / gnome_items * 1e3:.2f} ms each", "(no bar)", True)

if "sync-first/ms" in rss:
    n, first, change = rss["sync-items"], rss["sync-first/ms"], rss["sync-change/ms"]
    add(f"`security sync now`: a new device's first exchange of {n:,} synchronizable items (fetch, open, verify, store)",
        f"{first / 1000:.2f} s", "", f"{first / n * 1000:.0f} us each", "(no bar)", True)
    add(f"one change travelling A to B through a bare repository (A's `sync now`, then B's), {n:,} items each",
        f"{change} ms", "", "", "(no bar)", True)

ours_rss, gnome_rss = rss["service-rss/ours"], rss["service-rss/gnome"]
ours_anon, gnome_anon = rss["service-anon/ours"], rss["service-anon/gnome"]
add(f"private (anonymous) memory of the provider holding {gnome_items:,} items, vs gnome-keyring-daemon",
    f"{ours_anon / 1024:.1f} MiB", f"{gnome_anon / 1024:.1f} MiB", f"{ours_anon / gnome_anon:.2f}x", "<= 0.25x",
    ours_anon <= gnome_anon / 4)
ours_pss, gnome_pss = rss.get("service-pss/ours"), rss.get("service-pss/gnome")
pss = lambda kib: f", PSS {kib / 1024:.1f} MiB" if kib else ""
add(f"resident (RSS) and proportional (PSS) memory of the same", f"RSS {ours_rss / 1024:.1f} MiB{pss(ours_pss)}",
    f"RSS {gnome_rss / 1024:.1f} MiB{pss(gnome_pss)}", f"{ours_rss / gnome_rss:.2f}x (RSS)", "(no bar)", True)
floor_rss = rss["service-rss/floor"]
add("resident memory of a C program doing only what any provider on this stack must (sd-bus, SQLite, libsodium, "
    "OpenSSL AES-GCM, one DH)", f"{floor_rss / 1024:.1f} MiB", f"{gnome_rss / 4 / 1024:.1f} MiB (a quarter of gnome-keyring-daemon)",
    "", "(the floor under this stack)", True)

for helper in ("git-credential-keychain", "docker-credential-keychain"):
    kib = rss[f"rss/{helper}"]
    add(f"peak RSS of `{helper} get`", f"{kib / 1024:.1f} MiB", "", "", "<= 15 MiB", kib <= 15 * 1024)
peers = ", ".join(f"{k[4:]} {v / 1024:.1f} MiB" for k, v in rss.items() if k.startswith("rss/") and not k.endswith("-keychain"))

cpus = os.cpu_count()
mem = next((int(l.split()[1]) // 1024 // 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
date = os.environ.get("BENCH_DATE") or os.popen("date -u +%Y-%m-%d").read().strip()
# The machine's load beside the figures (bench/run.sh saves /proc/loadavg at its start and end):
# wall-clock figures on a shared machine move with it.
loads = [l.split()[:3] for l in open(os.path.join(work, "load.txt"))] if os.path.exists(os.path.join(work, "load.txt")) else []
load = f" Load average (1, 5, 15 min) at the start {' '.join(loads[0])}, at the end {' '.join(loads[-1])}." if len(loads) >= 2 else ""
table = [f"make bench, {date}: {cpus} cores ({model}), {mem} GiB; "
         f"process figures are medians of {rounds} runs per case after 5 warm-ups, cases interleaved. "
         f"Sizes: {store_items:,} items in the keychain and credential-store, {gnome_items:,} in the Secret Service "
         f"providers, {big:,} for the big SecItem figures.{load}",
         "",
         "| figure | ours | peer | ratio | bar | met |",
         "|---|---|---|---|---|---|"]
table += ["| " + " | ".join(row) + " |" for row in rows]
table += ["", f"Peers' peak RSS for comparison: {peers}."]
if note:
    table.append(note)
print("\n" + "\n".join(table))


def write_readme(path, table):
    """The table between BEGIN and END; the rest of the file as it was."""
    text = open(path).read()
    if BEGIN not in text or END not in text or text.index(BEGIN) > text.index(END):
        sys.exit(f"report.py: {path} has no table markers ({BEGIN!r} ... {END!r}); the table was not written")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + BEGIN + "\n" + "\n".join(table) + "\n" + END + tail
    with open(path + ".tmp", "w") as out:
        out.write(new)
    os.replace(path + ".tmp", path)
    print(f"\nwritten to {path}", file=sys.stderr)


for readme in readmes:
    write_readme(readme, table)
