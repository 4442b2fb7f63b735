#!/usr/bin/env bash
# `make test-vm`: the Debian package booted for real, on Debian 12 (bookworm) or 13 (trixie). The
# release's own package (packaging/deb/build.sh RELEASE) is checked by that release's lintian and
# installed with apt-get in a chroot (as an image build installs it), then with `apt install
# ./FILE` on the first boot of a guest of the same release made by mmdebstrap (Tests/vm/image.sh,
# cached under /tmp/keychain-vm-cache), which qemu boots under TCG with its own kernel; the guest
# is driven on its serial lines (Tests/vm/drive.py): keychain-broker.socket listens from the install
# and every boot, a user logs in through getty and /etc/pam.d/login (the keys go into the broker's
# keeping), logs out, reboots, changes the password, hands the desktop's Secret Service
# over and back with a real systemd --user, and a logout must end the login session. Everything is bounded in time and qemu is killed at the end. Not part of `make
# test`: the first run of a release builds its image (a few minutes), and each boot is emulated.
# Usage: Tests/vm/run.sh [RELEASE]   (as root; bookworm by default; needs mmdebstrap,
#        qemu-system-x86, python3-pexpect: make test-vm) The summary line names the release.
#        KC_VM_PACKAGE=FILE.deb Tests/vm/run.sh [RELEASE]   boots that package instead of building one.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/../lib.sh"
release=${1:-bookworm}
case $release in
bookworm) label="Debian 12 (bookworm)" ;;
trixie) label="Debian 13 (trixie)" ;;
*) echo "usage: Tests/vm/run.sh [bookworm|trixie]" >&2; exit 2 ;;
esac
echo "== $label"
# lib.sh's summary line, naming the release, so that each run of `make test-vm` ends with its own.
summary_of_release() { summary | sed "\$s/^/$label: /"; return "${PIPESTATUS[0]}"; }

if [ "$(id -u)" != 0 ]; then
    skip "building the image, the chroot install and the mount namespace need root"
    summary_of_release
    exit 0
fi
for tool in mmdebstrap qemu-system-x86_64 mke2fs; do
    command -v "$tool" >/dev/null || { skip "$tool is missing (make test-vm installs it)"; summary_of_release; exit 0; }
done
python3 -c 'import pexpect' 2>/dev/null || { skip "python3-pexpect is missing (make test-vm installs it)"; summary_of_release; exit 0; }

work=$(mktemp -d /tmp/kc-vm-XXXXXX)
expiry=$(cat /proc/sys/kernel/keys/persistent_keyring_expiry)
cleanup() {
    # The driver kills qemu itself; this is for a driver that was killed.
    if [ -s "$work/qemu.pid" ]; then kill -KILL "$(cat "$work/qemu.pid")" 2>/dev/null; fi
    echo "$expiry" > /proc/sys/kernel/keys/persistent_keyring_expiry
    rm -rf "$work"
}
trap cleanup EXIT
fresh() { case_dir=$work/case; mkdir -p "$case_dir"; }
finish() { :; }

user=kcvm password='Vm-login-1'

builds_the_package() {
    if [ -n "${KC_VM_PACKAGE:-}" ]; then realpath "$KC_VM_PACKAGE" > "$work/package" && return; fi
    { make -s -C "$repo" release && bash "$repo/packaging/deb/build.sh" "$work" "$release"; } > "$work/package" 2> "$work/build.log" ||
        { tail -20 "$work/build.log"; return 1; }
    tail -1 "$work/package" > "$work/package.path" && mv "$work/package.path" "$work/package"
    [ -f "$(cat "$work/package")" ]
}

# The release's own lintian: this machine's for its release, the release's build root's
# (packaging/deb/chroot.sh) for the other.
lintian_is_clean() {
    local package buildroot inside
    package=$(cat "$work/package")
    if [ "$release" = "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" ]; then
        lintian --no-tag-display-limit "$package" > "$work/lintian" 2>&1 || true
    else
        buildroot=$(bash "$repo/packaging/deb/chroot.sh" "$release" 2> "$work/chroot.log" | tail -1) || { tail -20 "$work/chroot.log"; return 1; }
        inside=$(mktemp -d "$buildroot/tmp/keychain-lintian-XXXXXX")
        cp "$package" "$inside/"
        chroot "$buildroot" lintian --no-tag-display-limit "/tmp/${inside##*/}/${package##*/}" > "$work/lintian" 2>&1 || true
        rm -rf "$inside"
    fi
    cat "$work/lintian"
    ! grep -E '^(E|W): ' "$work/lintian"
}

builds_the_image() {
    bash "$here/image.sh" "$release" > "$work/image" 2> "$work/image.log" || { tail -20 "$work/image.log"; return 1; }
    [ -x "$(tail -1 "$work/image")/usr/lib/systemd/systemd" ]
}

# In a chroot with /proc mounted, as mmdebstrap and debootstrap run maintainer scripts: the
# package's sysctl must not reach this machine's running kernel (a value it would not set is put
# there first, and must still be there), and its PAM profile must be in the image's login stack.
# On a copy of the image: the guest gets the package as a user does, on its first boot (drive.py).
installs_into_a_chroot() {
    local base root package sentinel after
    base=$(tail -1 "$work/image") root=$work/chroot package=$(cat "$work/package")
    rm -rf "$root" && cp -a "$base" "$root"
    cp "$package" "$root/tmp/keychain-for-linux.deb"
    sentinel=$((31536000 - 1))
    echo "$sentinel" > /proc/sys/kernel/keys/persistent_keyring_expiry
    unshare -m --propagation private bash -c '
        set -e
        mount -t proc proc "$1/proc"
        mount --bind /dev "$1/dev"
        DEBIAN_FRONTEND=noninteractive chroot "$1" apt-get install -y --no-install-recommends /tmp/keychain-for-linux.deb' - "$root" > "$work/dpkg.log" 2>&1 ||
        { cat "$work/dpkg.log"; return 1; }
    after=$(cat /proc/sys/kernel/keys/persistent_keyring_expiry)
    echo "$expiry" > /proc/sys/kernel/keys/persistent_keyring_expiry
    expect "$sentinel" "$after" "this machine's kernel.keys.persistent_keyring_expiry after the chroot install"
    for file in common-auth common-session common-password; do
        grep -q '^[^#].*pam_keychain\.so' "$root/etc/pam.d/$file" || { echo "the image's $file does not name pam_keychain.so"; return 1; }
    done
    rm -rf "$root"
}

# The guest: the release's image as mmdebstrap made it, the package file in root's home for the
# first boot to install, a user with a password, the root file system on the first virtio disk,
# and a root shell on the second serial line for the driver (a service, not a login: it opens no
# session).
prepares_the_guest() {
    local root=$work/root
    rm -rf "$root" && cp -a "$(tail -1 "$work/image")" "$root"
    cp "$(cat "$work/package")" "$root/root/keychain-for-linux.deb"
    echo kcvm > "$root/etc/hostname"
    printf '127.0.0.1 localhost\n127.0.1.1 kcvm\n' > "$root/etc/hosts"
    echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' > "$root/etc/fstab"
    chroot "$root" useradd -m -s /bin/bash "$user"
    echo "$user:$password" | chroot "$root" chpasswd
    cat > "$root/etc/systemd/system/kc-control.service" <<'UNIT'
[Unit]
Description=The test driver's root shell on ttyS1
After=systemd-user-sessions.service

[Service]
ExecStart=/bin/bash --noprofile --norc
StandardInput=tty
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS1
TTYReset=yes
Environment=TERM=dumb PS1=
Restart=always

[Install]
WantedBy=multi-user.target
UNIT
    chroot "$root" systemctl enable kc-control.service >/dev/null 2>&1
    cp "$root"/boot/vmlinuz-* "$work/vmlinuz" && cp "$root"/boot/initrd.img-* "$work/initrd.img"
    mke2fs -q -t ext4 -L root -d "$root" "$work/disk.img" 4G
    rm -rf "$root"
}

check "make deb: the $release package" builds_the_package
check "lintian of $release: no error, no warning" lintian_is_clean
check "the $label image (mmdebstrap, cached in /tmp/keychain-vm-cache)" builds_the_image
check "apt-get install ./FILE in a chroot (no download: its Depends are the release's installed libraries): this machine's kernel untouched, the PAM profile in common-auth/-session/-password" installs_into_a_chroot
check "the guest's disk: the package file, a user, the driver's shell, the kernel" prepares_the_guest

# The boots: drive.py writes one line per case, `ok|FAIL<TAB>name<TAB>detail`, in order.
if [ -f "$work/disk.img" ]; then
    : > "$work/results"
    timeout 3000 python3 "$here/drive.py" --work "$work" --user "$user" --password "$password" > "$work/drive.log" 2>&1
    verdict() { [ "$1" = ok ] || { printf '%s\n' "$2"; tail -15 "$work/drive.log"; return 1; }; }
    while IFS=$'\t' read -r outcome name detail; do
        check "$name" verdict "$outcome" "$detail"
    done < "$work/results"
    [ -s "$work/results" ] || check "the guest boots" verdict FAIL "no result from drive.py"
    cp "$work/drive.log" "/tmp/keychain-vm-last-$release.log"
    echo "the guest's serial lines: /tmp/keychain-vm-last-$release.log"
fi
summary_of_release
