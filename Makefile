# Keychain for Linux. `make demo` and `make test` are the two set-up commands of the README.
SHELL := /bin/bash
PREFIX ?= /usr/local
MULTIARCH := $(shell gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
PAMDIR ?= /usr/lib/$(MULTIARCH)/security
# /etc for a hand install (the administrator's folder); the package uses /usr/lib/sysctl.d.
SYSCTLDIR ?= /etc/sysctl.d
MANPAGES := $(patsubst man/%.scd,.build/man/%,$(wildcard man/*.scd))
SWIFT ?= swift
export PATH := /opt/swift/usr/bin:$(PATH)

# Debian packages, in sets, so that each target installs only what it uses: `make release`
# must not bring a registry listening on *:5000 or a docker daemon onto a machine that only wants
# the tools, and `make install` installs no package at all (second security review, finding 5).
# What the build needs beyond the Swift toolchain's own prerequisites (gcc, libstdc++-12-dev, ...,
# taken as given with /opt/swift): the system libraries the C shims link, pkg-config to find them,
# git for SwiftPM to fetch swift-argument-parser, binutils for `install -s`, scdoc for the man pages.
BUILD_DEBS := libsqlite3-dev libssl-dev libsodium-dev libpam0g-dev libsystemd-dev libtss2-dev pkg-config git binutils scdoc
# What packaging/deb/build.sh adds: dpkg-architecture and dpkg-shlibdeps; and for another release's
# package (`make deb RELEASE=trixie` on Debian 12), mmdebstrap for that release's build root.
DEB_DEBS := dpkg-dev
DEB_CHROOT_DEBS := mmdebstrap
# The Debian release `make deb` makes the package for (bookworm or trixie; this machine's unless
# given), and the ones `make test-vm` boots (both unless given).
RELEASE ?=
HOST_RELEASE := $(shell . /etc/os-release 2>/dev/null && echo $$VERSION_CODENAME)
# What `make check` adds: shellcheck, and python3 for Tools/check-imports.py.
CHECK_DEBS := shellcheck python3
# What the tests add (`make deps`): the real clients and servers they drive. docker.io too, unless
# a docker is already on the PATH (deps adds it).
TEST_DEBS := keyutils sqlite3 curl docker-registry apache2-utils skopeo pamtester libpam-wrapper passwd util-linux \
        openssl gcc dbus-daemon libsecret-tools python3-secretstorage libsecret-1-dev golang-docker-credential-helpers \
        polkitd pkexec python3-dbus python3-gi man-db lintian bubblewrap gnome-keyring python3-cryptography chromium libpam-gnome-keyring procps make \
        swtpm tpm2-tools xdg-desktop-portal openssh-server openssh-client libkf5wallet-bin keepassxc python3-keyring mmdebstrap kwalletcli \
        xvfb xdotool imagemagick gcr pinentry-gnome3 xdg-desktop-portal-gtk
DEBS := $(sort $(BUILD_DEBS) $(DEB_DEBS) $(CHECK_DEBS) $(TEST_DEBS))

# What `make bench` adds: the peers it measures against, and what builds them.
BENCH_DEBS := golang-docker-credential-helpers pass gnupg gnome-keyring libsecret-1-dev libsecret-tools dbus-daemon \
              libglib2.0-dev gcc make

# What `make test-vm` adds: mmdebstrap builds the guest, qemu boots it, pexpect drives its serial
# lines, mke2fs makes its disk.
VM_DEBS := mmdebstrap qemu-system-x86 python3-pexpect e2fsprogs

# What `make install` copies: all of it is made by `make release`.
INSTALL_INPUTS := $(addprefix .build/release/,security git-credential-keychain docker-credential-keychain keychain-secret-service \
                  keychain-ssh-agent keychain-tpm-helper keychain-broker libpam_keychain.so) $(addsuffix .gz,$(MANPAGES))
# The broker's system user (packaging/broker/keychain-broker.sysusers), in group tss (the TPM's).
BROKER_USER := keychain-broker

# Tools/quiet-build.sh hides glibc's linker notes about every getaddrinfo/dlopen/... reachable in the
# statically linked tools (from libcrypto, SQLite and the Swift runtime; none of those paths runs in
# them: see CONTRIBUTING.md), and fails the build on a compiler warning about the project's own code.
# `set -o pipefail` keeps the build's own status.
QUIET_STATIC := bash Tools/quiet-build.sh
SWIFT_BUILD := set -o pipefail; $(SWIFT) build

.PHONY: deb test-deb test-vm man deps build-deps deb-deps check-deps vm-deps install-debs bench-deps bench build release check test test-unit \
        test-cli test-tpm test-tpm-pam test-git test-docker test-pam test-install test-secret-service test-desktop test-kde test-trixie test-presence test-broker test-access test-dialog test-sync test-ssh stress demo install uninstall clean

# Everything the tests need (make test, make demo).
deps:
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(DEBS) $$(command -v docker >/dev/null || echo docker.io)"

build-deps:
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(BUILD_DEBS)"

deb-deps:
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(BUILD_DEBS) $(DEB_DEBS) $(if $(filter-out $(HOST_RELEASE),$(RELEASE)),$(DEB_CHROOT_DEBS))"

check-deps:
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(BUILD_DEBS) $(CHECK_DEBS)"

vm-deps:
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(BUILD_DEBS) $(DEB_DEBS) $(VM_DEBS)"

bench-deps: deps
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(BENCH_DEBS)"

install-debs:
	@missing=$$(for p in $(PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing >/dev/null; \
	fi

build: build-deps
	@$(SWIFT_BUILD) 2>&1 | $(QUIET_STATIC)

# Everything `make install` copies: the release products and the man pages.
release: build-deps
	@$(SWIFT_BUILD) -c release 2>&1 | $(QUIET_STATIC)
	@$(MAKE) --no-print-directory man

# Without root, on a built tree: the unit tests, shellcheck, swift-format lint and the import check
# (Tools/check.sh; CONTRIBUTING.md). .ci/run runs it before `make test`.
check: check-deps
	@bash Tools/check.sh

test: deps
	@$(SWIFT_BUILD) --build-tests 2>&1 | $(QUIET_STATIC)
	bash Tests/run-all.sh

test-unit:
	$(SWIFT) test --skip-build --disable-swift-testing

test-cli:
	bash Tests/cli/run.sh .build/debug/security

test-git:
	bash Tests/git/run.sh .build/debug

test-docker:
	bash Tests/docker/run.sh .build/debug

test-pam:
	bash Tests/pam/run.sh .build/debug

test-install:
	bash Tests/install/run.sh

# A software TPM (swtpm) on 127.0.0.1, started and stopped by the suite.
test-tpm:
	bash Tests/tpm/run.sh .build/debug

# pam_keychain's passwordless option: pamtester as root, throwaway users and services, swtpm.
test-tpm-pam:
	bash Tests/tpm-pam/run.sh .build/debug

test-secret-service:
	bash Tests/secret-service/run.sh .build/debug

# enable/disable/status, import/export over D-Bus and the portal backend, against gnome-keyring.
test-desktop:
	bash Tests/desktop/run.sh .build/debug

# KWallet (kwalletd5 headless) and KeePassXC: import and export, each case in its own bus.
test-kde:
	bash Tests/kde/run.sh .build/debug

# root: Debian 13's own programs (kwalletd6, gcr-ssh-agent, OpenSSH 10's agent socket, sshd) in a
# trixie root that mmdebstrap builds once (a few minutes) and caches under /tmp; skipped without it.
test-trixie:
	bash Tests/trixie/run.sh .build/debug

# root: a private system bus and polkitd, a throwaway user (see Tests/presence/run.sh).
test-presence:
	bash Tests/presence/run.sh .build/debug

# root: keychain-broker as its own throwaway system user (setpriv), a throwaway user as its client.
test-broker:
	bash Tests/broker/run.sh .build/debug

# root: issue 54's attacker suite: a program of the user's own uid at every door of the broker's keychain.
test-access:
	bash Tests/access/run.sh .build/debug

# root: issue 55's question as the person meets it: gcr's prompter on Xvfb and a private session
# bus (seen and answered with xdotool), a scripted pinentry, the broker's limit on questions.
test-dialog:
	bash Tests/dialog/run.sh .build/debug

# root: three throwaway users sharing a bare repository (see Tests/sync/run.sh); about two minutes.
test-sync:
	bash Tests/sync/run.sh .build/debug

# root: two sshd of its own on 127.0.0.1, a throwaway user; AGENT=/usr/bin/ssh-agent runs the generic cases against OpenSSH's agent.
test-ssh:
	bash Tests/ssh/run.sh .build/debug

# The long hardening run (about 10 minutes); `make test` runs the same cases with small counts.
stress: deps
	@$(SWIFT_BUILD) --build-tests 2>&1 | $(QUIET_STATIC)
	bash Tests/stress/run.sh .build/debug --long

# Not part of `make test`: figures against the peers, one table, written into bench/README.md.
bench: bench-deps release
	bash bench/run.sh

demo: deps build
	bash Tests/demo.sh .build/debug/security

# Man pages, one scdoc source each (man/*.scd), gzipped as Debian installs them. scdoc writes
# tables without the first line that asks man for tbl (`'\" t`); groff 1.23 (Debian 13) then warns
# that they are not rendered, and trixie's lintian with it.
man: $(MANPAGES)

.build/man/%: man/%.scd Makefile
	@mkdir -p .build/man
	{ printf "'\\\\\" t\n"; scdoc < $<; } | gzip -9n > $@.gz && touch $@

# Stripped (install -s): the tools are static, the Swift runtime inside, and need nothing from the
# toolchain; the module keeps the dynamic symbols PAM looks up. Builds nothing and installs no
# package: run as root, it would leave root-owned files in .build and pull in whatever the build
# wants. `make release` (as yourself) first; $(shell) rather than $(wildcard), which may answer
# from make's cache of the folder.
install:
	$(if $(shell for f in $(INSTALL_INPUTS); do [ -e $$f ] || echo $$f; done),$(error nothing is built: run `make release` first, then `sudo make install`))
	install -d $(DESTDIR)$(PREFIX)/bin
	install -s -m 0755 .build/release/security $(DESTDIR)$(PREFIX)/bin/security
	install -s -m 0755 .build/release/git-credential-keychain $(DESTDIR)$(PREFIX)/bin/git-credential-keychain
	install -s -m 0755 .build/release/docker-credential-keychain $(DESTDIR)$(PREFIX)/bin/docker-credential-keychain
	install -s -m 0755 .build/release/keychain-secret-service $(DESTDIR)$(PREFIX)/bin/keychain-secret-service
	# The TPM's ESAPI runs in a program of its own (tpm2-tss has no static library for the static
	# tools); the engine finds it in ../libexec from the tool that needs it.
	install -d $(DESTDIR)$(PREFIX)/libexec
	install -s -m 0755 .build/release/keychain-tpm-helper $(DESTDIR)$(PREFIX)/libexec/keychain-tpm-helper
	# Started on demand by the session bus (and by systemd --user where it runs the session). The
	# file is named for this project, not for the bus name: gnome-keyring owns
	# org.freedesktop.secrets.service, and the bus reads the name from inside the file.
	install -d $(DESTDIR)$(PREFIX)/share/dbus-1/services $(DESTDIR)$(PREFIX)/lib/systemd/user
	sed 's|@BINDIR@|$(PREFIX)/bin|' Sources/keychain-secret-service/dbus/org.freedesktop.secrets.service.in \
		> $(DESTDIR)$(PREFIX)/share/dbus-1/services/org.keychain-linux.secrets.service
	sed 's|@BINDIR@|$(PREFIX)/bin|' Sources/keychain-secret-service/dbus/keychain-secret-service.service.in \
		> $(DESTDIR)$(PREFIX)/lib/systemd/user/keychain-secret-service.service
	# Sync (`security sync`): a periodic exchange and one shortly after local writes, for the
	# user to enable: `systemctl --user enable --now keychain-sync.timer keychain-sync.path`.
	sed 's|@BINDIR@|$(PREFIX)/bin|' packaging/systemd/keychain-sync.service.in > $(DESTDIR)$(PREFIX)/lib/systemd/user/keychain-sync.service
	install -m 0644 packaging/systemd/keychain-sync.timer packaging/systemd/keychain-sync.path $(DESTDIR)$(PREFIX)/lib/systemd/user/
	# The SSH agent: a socket unit starts it on demand, for the user to enable
	# (`systemctl --user enable --now keychain-ssh-agent.socket`); the environment generator sets
	# SSH_AUTH_SOCK only for users who did (see the file for why not a fixed environment.d file).
	install -s -m 0755 .build/release/keychain-ssh-agent $(DESTDIR)$(PREFIX)/bin/keychain-ssh-agent
	sed 's|@BINDIR@|$(PREFIX)/bin|' packaging/systemd/keychain-ssh-agent.service.in > $(DESTDIR)$(PREFIX)/lib/systemd/user/keychain-ssh-agent.service
	install -m 0644 packaging/systemd/keychain-ssh-agent.socket $(DESTDIR)$(PREFIX)/lib/systemd/user/
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/user-environment-generators
	install -m 0755 packaging/systemd/keychain-ssh-agent-environment \
		$(DESTDIR)$(PREFIX)/lib/systemd/user-environment-generators/20-keychain-ssh-agent
	# polkit reads actions from /usr/share only, whatever PREFIX is.
	install -d $(DESTDIR)/usr/share/polkit-1/actions
	install -m 0644 polkit/org.keychain-linux.user-presence.policy $(DESTDIR)/usr/share/polkit-1/actions/
	# xdg-desktop-portal's Secret backend (Flatpak apps' secrets), served by keychain-secret-service
	# under the Secret Service's bus name; xdg-desktop-portal reads /usr/share only, whatever PREFIX is.
	install -d $(DESTDIR)/usr/share/xdg-desktop-portal/portals
	install -m 0644 Sources/keychain-secret-service/dbus/keychain.portal $(DESTDIR)/usr/share/xdg-desktop-portal/portals/keychain.portal
	# The broker (see docs/install.md): a system service of its own user, started by its socket
	# (enabled when systemd runs the machine) or by keychain-broker-start where systemd does not.
	install -s -m 0755 .build/release/keychain-broker $(DESTDIR)$(PREFIX)/libexec/keychain-broker
	install -m 0755 packaging/broker/keychain-broker-start $(DESTDIR)$(PREFIX)/libexec/keychain-broker-start
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/lib/sysusers.d
	sed 's|@LIBEXECDIR@|$(PREFIX)/libexec|' packaging/broker/keychain-broker.service.in > $(DESTDIR)$(PREFIX)/lib/systemd/system/keychain-broker.service
	install -m 0644 packaging/broker/keychain-broker.socket $(DESTDIR)$(PREFIX)/lib/systemd/system/
	install -m 0644 packaging/broker/keychain-broker.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/keychain-broker.conf
	install -d $(DESTDIR)$(PAMDIR) $(DESTDIR)/usr/share/pam-configs
	install -s -m 0644 .build/release/libpam_keychain.so $(DESTDIR)$(PAMDIR)/pam_keychain.so
	# Default: yes, as the package's postinst enables it; a hand install runs no pam-auth-update,
	# so the next run of it (`sudo pam-auth-update --enable keychain`, or any package's) adds it.
	install -m 0644 pam/pam-configs-keychain $(DESTDIR)/usr/share/pam-configs/keychain
	# The persistent keyring (where AfterFirstUnlock keys live until reboot) expires after three
	# days unused by default; raise that so "until reboot" holds.
	install -d $(DESTDIR)$(SYSCTLDIR)
	echo 'kernel.keys.persistent_keyring_expiry = 31536000' > $(DESTDIR)$(SYSCTLDIR)/60-keychain.conf
	# Without Yama's restriction, any process of a user may patch another of the user's processes
	# (one the broker trusts) through ptrace; 1 keeps ptrace to a process's own descendants
	# (Ubuntu's default). The leading "-": a kernel without Yama is not an error.
	install -m 0644 packaging/broker/61-keychain-ptrace.conf $(DESTDIR)$(SYSCTLDIR)/61-keychain-ptrace.conf
	if [ -z "$(DESTDIR)" ]; then for conf in 60-keychain.conf 61-keychain-ptrace.conf; do \
		sysctl -q -p $(SYSCTLDIR)/$$conf >/dev/null 2>&1 || true; done; fi
	# The broker's user, on this machine (not into a DESTDIR: the package's postinst makes it).
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
		getent group tss >/dev/null || groupadd -r tss; \
		getent passwd $(BROKER_USER) >/dev/null || \
			useradd -r -U -M -d /nonexistent -s /usr/sbin/nologin -c 'Keychain broker' $(BROKER_USER); \
		usermod -a -G tss $(BROKER_USER); \
		if [ -d /run/systemd/system ]; then \
			systemctl daemon-reload && systemctl enable --now keychain-broker.socket; \
		else echo "no systemd here: start the broker with $(PREFIX)/libexec/keychain-broker-start"; fi; \
	fi
	for page in $(MANPAGES); do \
		section=$${page##*.}; install -d $(DESTDIR)$(PREFIX)/share/man/man$$section; \
		install -m 0644 $$page.gz $(DESTDIR)$(PREFIX)/share/man/man$$section/; done
	# Completions, as swift-argument-parser writes them for every subcommand.
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions \
		$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	.build/release/security --generate-completion-script bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/security
	.build/release/security --generate-completion-script zsh > $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions/_security
	.build/release/security --generate-completion-script fish > $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/security.fish

# The Debian package (see packaging/deb/build.sh): keychain-for-linux_<version>~deb12u1_<arch>.deb
# (~deb13u1 for trixie) in this folder. Another release's (RELEASE=trixie on Debian 12) takes root:
# its Depends come from that release's own build root, made by mmdebstrap and cached under /tmp.
deb: deb-deps
	@$(MAKE) --no-print-directory release
	@bash packaging/deb/build.sh . $(RELEASE)

# root: installs the package with apt-get, uses it with /opt/swift hidden, purges it.
test-deb:
	bash Tests/deb/run.sh

# root: each release's package booted in a guest of that release under qemu (Tests/vm/run.sh), Debian
# 12 then 13, or RELEASE=bookworm|trixie alone; each run ends with its own summary line. Not part
# of `make test`. The first run builds each guest's image (cached under /tmp/keychain-vm-cache).
test-vm: vm-deps
	@status=0; for release in $(or $(RELEASE),bookworm trixie); do bash Tests/vm/run.sh $$release || status=1; done; exit $$status

uninstall:
	if [ -z "$(DESTDIR)" ] && command -v pam-auth-update >/dev/null; then pam-auth-update --package --remove keychain; fi
	# The broker stops before its program goes; its user stays, as a package's does (files it
	# owned may remain): `userdel keychain-broker` removes it.
	if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemctl disable --now keychain-broker.socket keychain-broker.service || true; fi
	if [ -z "$(DESTDIR)" ] && [ -f /run/keychain-broker.pid ]; then $(PREFIX)/libexec/keychain-broker-start --stop || true; fi
	rm -f $(DESTDIR)$(PREFIX)/libexec/keychain-broker $(DESTDIR)$(PREFIX)/libexec/keychain-broker-start \
		$(DESTDIR)$(PREFIX)/lib/systemd/system/keychain-broker.service $(DESTDIR)$(PREFIX)/lib/systemd/system/keychain-broker.socket \
		$(DESTDIR)$(PREFIX)/lib/sysusers.d/keychain-broker.conf $(DESTDIR)$(SYSCTLDIR)/61-keychain-ptrace.conf
	if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
	rm -f $(DESTDIR)/usr/share/pam-configs/keychain $(DESTDIR)$(PAMDIR)/pam_keychain.so
	rm -f $(DESTDIR)$(PREFIX)/bin/security $(DESTDIR)$(PREFIX)/bin/git-credential-keychain $(DESTDIR)$(PREFIX)/bin/docker-credential-keychain $(DESTDIR)$(SYSCTLDIR)/60-keychain.conf
	rm -f $(patsubst .build/man/%,$(DESTDIR)$(PREFIX)/share/man/man*/%.gz,$(MANPAGES))
	rm -f $(DESTDIR)$(PREFIX)/share/bash-completion/completions/security $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions/_security \
		$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/security.fish
	rm -f $(DESTDIR)/usr/share/polkit-1/actions/org.keychain-linux.user-presence.policy
	rm -f $(DESTDIR)$(PREFIX)/libexec/keychain-tpm-helper
	rm -f $(DESTDIR)/usr/share/xdg-desktop-portal/portals/keychain.portal
	rm -f $(DESTDIR)$(PREFIX)/bin/keychain-secret-service $(DESTDIR)$(PREFIX)/share/dbus-1/services/org.keychain-linux.secrets.service \
		$(DESTDIR)$(PREFIX)/lib/systemd/user/keychain-secret-service.service
	rm -f $(DESTDIR)$(PREFIX)/lib/systemd/user/keychain-sync.service $(DESTDIR)$(PREFIX)/lib/systemd/user/keychain-sync.timer \
		$(DESTDIR)$(PREFIX)/lib/systemd/user/keychain-sync.path
	rm -f $(DESTDIR)$(PREFIX)/bin/keychain-ssh-agent $(DESTDIR)$(PREFIX)/lib/systemd/user/keychain-ssh-agent.service \
		$(DESTDIR)$(PREFIX)/lib/systemd/user/keychain-ssh-agent.socket \
		$(DESTDIR)$(PREFIX)/lib/systemd/user-environment-generators/20-keychain-ssh-agent

clean:
	rm -rf .build
