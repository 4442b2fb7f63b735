#!/usr/bin/env bash
# `make deb`: builds keychain-for-linux_<version>_<arch>.deb from `make install` into a staging root
# (PREFIX=/usr, the sysctl drop-in in /usr/lib/sysctl.d), with the maintainer scripts, copyright,
# changelog, lintian overrides, md5sums, and Depends computed by dpkg-shlibdeps from what the
# dynamically linked binaries need (the static tools need nothing).
# Needs `make release` first (`make deb` runs it): `make install` builds nothing.
# Usage: packaging/deb/build.sh [OUTPUT_DIR]   Prints the package's path last.
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
    printf '%s (%s) unstable; urgency=medium\n\n' "$name" "$version"
    printf '  * Built from commit %s of keychain-for-linux.\n\n' "$commit"
    printf ' -- %s  %s\n' "$maintainer" "$(date -R -d "@${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}")"
} | gzip -9n > "$doc/changelog.gz"   # a native package: changelog, not changelog.Debian
install -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/$name"
# bash-completion sources the file: no interpreter line.
sed -i '1{/^#!/d}' "$root/usr/share/bash-completion/completions/security"

install -d "$root/DEBIAN"
for script in postinst prerm postrm; do install -m 0755 "$here/$script" "$root/DEBIAN/$script"; done

# dpkg-shlibdeps reads debian/control from its working folder.
mkdir -p "$stage/shlibs/debian"
printf 'Source: %s\n\nPackage: %s\nArchitecture: any\n' "$name" "$name" > "$stage/shlibs/debian/control"
depends=$(cd "$stage/shlibs" && dpkg-shlibdeps -O \
    -e"$root/usr/bin/keychain-secret-service" -e"$root/usr/bin/keychain-ssh-agent" -e"$root/usr/libexec/keychain-tpm-helper" \
    -e"$root/usr/lib/$multiarch/security/pam_keychain.so" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "dpkg-shlibdeps found no dependencies" >&2; exit 1; }

size=$(du -sk "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@SIZE@|$size|" -e "s|@DEPENDS@|$depends|" \
    "$here/control.in" > "$root/DEBIAN/control"
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

package=$out/${name}_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$package" >&2
echo "$package"
