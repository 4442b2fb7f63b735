#!/usr/bin/env bash
# `make deb`: builds keychain-for-linux_<version>_<arch>.deb from `make install` into a staging root
# (PREFIX=/usr, the sysctl drop-in in /usr/lib/sysctl.d), with the maintainer scripts, copyright,
# changelog, lintian overrides, md5sums, and Depends computed by dpkg-shlibdeps from what the
# dynamically linked binaries need (the static tools need nothing).
# One package per Debian release: the same binaries (built here, by the Debian 12 toolchain, with
# Swift's runtime inside), and the release's own Depends. Trixie's libraries are its 64-bit time_t
# packages, and its libtss2-mu.so.0 (tpm2-tss 4, whose ABI broke without a new soname) is in a
# package of another name that conflicts with bookworm's, so no one Depends line fits both. For the
# release this machine runs, dpkg-shlibdeps runs here; for another, in that release's build root
# (packaging/deb/chroot.sh), where the binaries must also load against its libraries.
# Needs `make release` first (`make deb` runs it): `make install` builds nothing.
# Usage: packaging/deb/build.sh [OUTPUT_DIR [RELEASE]]   (RELEASE: bookworm or trixie, by default
# this machine's) Prints the package's path last.
set -euo pipefail
# Not `keychain`: Debian has a package of that name (an ssh-agent manager, 2.8.5), which apt would
# take for a newer version of this one and swap in at the next upgrade.
name=keychain-for-linux
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$(cd "${1:-$repo}" && pwd)

# VERSION, and the commit count when built from git, so that every later commit upgrades.
version=$(cat "$repo/VERSION")
if count=$(git -C "$repo" rev-list --count HEAD 2>/dev/null); then version="$version+git$count"; fi
host_release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
release=${2:-$host_release}
# The release in the version, as Debian's stable updates do (~deb12u1 below ~deb13u1, both below
# the bare version), so that both files can sit in one apt repository and apt on each release
# takes its own from there.
case $release in
bookworm) version="$version~deb12u1" ;;
trixie) version="$version~deb13u1" ;;
*) echo "build.sh: no package for release '$release' (bookworm, trixie)" >&2; exit 2 ;;
esac
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
arch=$(dpkg --print-architecture)
maintainer=$(sed -n 's/^Maintainer: //p' "$here/control.in")

stage=$(mktemp -d /tmp/keychain-deb-XXXXXX)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
make -s -C "$repo" install DESTDIR="$root" PREFIX=/usr SYSCTLDIR=/usr/lib/sysctl.d >&2
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

doc=$root/usr/share/doc/$name
install -d "$doc" "$root/usr/share/lintian/overrides"
install -m 0644 "$here/copyright" "$doc/copyright"
{
    printf '%s (%s) %s; urgency=medium\n\n' "$name" "$version" "$release"
    printf '  * Built from commit %s of keychain-for-linux.\n\n' "$commit"
    printf ' -- %s  %s\n' "$maintainer" "$(date -R -d "@${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}")"
} | gzip -9n > "$doc/changelog.gz"   # a native package: changelog, not changelog.Debian
install -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/$name"
# bash-completion sources the file: no interpreter line.
sed -i '1{/^#!/d}' "$root/usr/share/bash-completion/completions/security"

install -d "$root/DEBIAN"
for script in postinst prerm postrm; do install -m 0755 "$here/$script" "$root/DEBIAN/$script"; done

# dpkg-shlibdeps reads debian/control from its working folder; in another release's build root, the
# linked programs are copied there with their paths.
linked=(usr/bin/keychain-secret-service usr/bin/keychain-ssh-agent usr/libexec/keychain-tpm-helper usr/libexec/keychain-broker
    "usr/lib/$multiarch/security/pam_keychain.so")
shlibs() {
    mkdir -p "$1/debian"
    printf 'Source: %s\n\nPackage: %s\nArchitecture: any\n' "$name" "$name" > "$1/debian/control"
    (cd "$1" && dpkg-shlibdeps -O "${linked[@]/#/-e$2/}" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
}
if [ "$release" = "$host_release" ]; then
    depends=$(shlibs "$stage/shlibs" "$root")
else
    buildroot=$(bash "$here/chroot.sh" "$release" | tail -1)
    inside=$(mktemp -d "$buildroot/tmp/keychain-shlibs-XXXXXX")
    trap 'rm -rf "$stage" "$inside"' EXIT
    for file in "${linked[@]}"; do install -D "$root/$file" "$inside/root/$file"; done
    # Every program loads against the release's libraries with every symbol bound: ldd -r names
    # a library or symbol it lacks.
    for file in "${linked[@]}"; do
        if chroot "$buildroot" ldd -r "/tmp/${inside##*/}/root/$file" 2>&1 | grep -E 'not found|undefined symbol' >&2; then
            echo "build.sh: $file does not load against $release's libraries" >&2; exit 1
        fi
    done
    depends=$(chroot "$buildroot" bash -c "$(declare -p name linked; declare -f shlibs); shlibs /tmp/${inside##*/} /tmp/${inside##*/}/root")
fi
[ -n "$depends" ] || { echo "dpkg-shlibdeps found no dependencies" >&2; exit 1; }

size=$(du -sk "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@SIZE@|$size|" -e "s|@DEPENDS@|$depends|" \
    "$here/control.in" > "$root/DEBIAN/control"
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

package=$out/${name}_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$package" >&2
echo "$package"
