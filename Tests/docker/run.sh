#!/usr/bin/env bash
# docker-credential-keychain with real clients against Debian's docker-registry (htpasswd basic
# auth) on 127.0.0.1: the docker CLI (which logs in client-side when no engine runs) and skopeo;
# then the protocol's edge cases fed to the helper directly. Every case has its own HOME, XDG
# folders, DOCKER_CONFIG and keychain; the registry stops by itself.
set -uo pipefail
bin=$(realpath "${1:-.build/debug}")
here=$(cd "$(dirname "$0")" && pwd)
export PATH="$bin:$PATH"
helper=docker-credential-keychain
. "$here/../lib.sh"

fresh() {
    case_dir=$(mktemp -d /tmp/docker-credential-XXXXXX)
    export HOME=$case_dir XDG_DATA_HOME=$case_dir/data XDG_CONFIG_HOME=$case_dir/config DOCKER_CONFIG=$case_dir/docker
    unset KEYCHAIN_PATH REGISTRY_AUTH_FILE
    mkdir -p "$DOCKER_CONFIG"
    echo '{"credsStore": "keychain"}' > "$DOCKER_CONFIG/config.json"
    printf 'pw\n' | security create-keychain
}

finish() {
    security delete-keychain login >/dev/null 2>&1
    [ -n "${registry_pid:-}" ] && kill "$registry_pid" 2>/dev/null && wait "$registry_pid" 2>/dev/null
    registry_pid=
    rm -rf "$case_dir"
}



# Starts docker-registry on a free loopback port with htpasswd auth for reguser / "reg pass".
start_registry() {
    port=$(free_port)
    htpasswd -Bbn reguser 'reg pass' > "$case_dir/htpasswd"
    cat > "$case_dir/registry.yml" <<YML
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $case_dir/registry
http:
  addr: 127.0.0.1:$port
auth:
  htpasswd:
    realm: test
    path: $case_dir/htpasswd
YML
    timeout 120 docker-registry serve "$case_dir/registry.yml" > "$case_dir/registry.log" 2>&1 &
    registry_pid=$!
    for _ in $(seq 100); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/")" = 401 ] && break
        sleep 0.1
    done
    registry=127.0.0.1:$port
}

# --- real clients --------------------------------------------------------------------------

docker_login_logout() {
    start_registry
    printf 'reg pass' | docker login "$registry" -u reguser --password-stdin
    expect 'reg pass' "$(security find-internet-password -s 127.0.0.1 -P "$port" -w)" "the password is in the keychain"
    ! grep -q -e 'reg pass' -e "$(printf 'reguser:reg pass' | base64)" "$DOCKER_CONFIG/config.json"
    security find-internet-password -s 127.0.0.1 | grep -q '0x00000007 <blob>="Docker Credentials"'
    expect "{\"$registry\":\"reguser\"}" "$(docker-credential-keychain list)"
    docker logout "$registry"
    ! security find-internet-password -s 127.0.0.1 >/dev/null 2>&1
    expect '{}' "$(docker-credential-keychain list)"
}

docker_wrong_password() {
    start_registry
    ! printf 'wrong' | docker login "$registry" -u reguser --password-stdin
    ! security find-internet-password -s 127.0.0.1 >/dev/null 2>&1
    expect '{}' "$(docker-credential-keychain list)"
}

docker_locked_keychain() {
    start_registry
    security lock-keychain
    out=$(printf 'reg pass' | timeout 30 docker login "$registry" -u reguser --password-stdin 2>&1) && return 1
    grep -q 'security unlock-keychain' <<< "$out"
}

skopeo_with_cred_helpers() {
    start_registry
    auth=$case_dir/auth.json
    echo "{\"credHelpers\": {\"$registry\": \"keychain\"}}" > "$auth"
    printf 'reg pass' | skopeo login --authfile "$auth" --tls-verify=false -u reguser --password-stdin "$registry"
    expect 'reg pass' "$(security find-internet-password -s 127.0.0.1 -P "$port" -w)"
    ! grep -q 'reg pass' "$auth"
    python3 "$here/make_oci_image.py" "$case_dir/image"
    skopeo --insecure-policy copy --quiet --authfile "$auth" --dest-tls-verify=false \
        "oci:$case_dir/image:latest" "docker://$registry/test/tiny:latest"
    skopeo inspect --authfile "$auth" --tls-verify=false "docker://$registry/test/tiny:latest" | grep -q '"Os": "linux"'
    # The registry really requires the login: without the helper, inspect is refused.
    echo '{}' > "$case_dir/empty.json"
    ! skopeo inspect --authfile "$case_dir/empty.json" --tls-verify=false "docker://$registry/test/tiny:latest" 2>/dev/null
    skopeo logout --authfile "$auth" "$registry"
    ! security find-internet-password -s 127.0.0.1 >/dev/null 2>&1
    ! skopeo inspect --authfile "$auth" --tls-verify=false "docker://$registry/test/tiny:latest" 2>/dev/null
}

# --- the protocol, directly ----------------------------------------------------------------

store_get_erase() {
    echo '{"ServerURL":"https://registry.example/v2/","Username":"alice","Secret":"s1"}' | $helper store
    expect '{"ServerURL":"https://registry.example/v2/","Username":"alice","Secret":"s1"}' "$(echo https://registry.example/v2/ | $helper get)"
    expect '{"ServerURL":"registry.example","Username":"alice","Secret":"s1"}' "$(echo '  registry.example  ' | $helper get)" "trimmed; no port or path is a wildcard"
    # store replaces: one item, the new user.
    echo '{"ServerURL":"https://registry.example/v2/","Username":"bob","Secret":"s2"}' | $helper store
    expect '{"https://registry.example/v2/":"bob"}' "$($helper list)"
    echo registry.example | $helper erase
    expect 'credentials not found in native keychain' "$(echo registry.example | $helper get)"
    expect 1 "$(echo registry.example | $helper get >/dev/null; echo $?)"
    # Erasing what is not there succeeds (skopeo's logout relies on it).
    echo registry.example | $helper erase
}

# The helper's new items trust it only under docker, podman, skopeo, buildah (issue 54).
helper_items_list() {
    echo '{"ServerURL":"https://registry.example/v2/","Username":"alice","Secret":"s1"}' | $helper store
    list=$(security access --internet -s registry.example | sed -n 's/^    entry 0: //p')
    expect "exe:$(realpath "$bin/$helper")<" "${list%%<*}<" "the helper's own resolved path"
    for parent in /usr/bin/docker /usr/bin/podman /usr/bin/skopeo /usr/bin/buildah /usr/libexec/docker/cli-plugins/docker-buildx; do
        grep -q "[<,]$parent\(,\|\$\)" <<< "$list" || { echo "no $parent in $list"; return 1; }
    done
}

field_names_and_tokens() {
    printf '{"serverurl":"r.example","USERNAME":"<token>","sEcReT":"identity-token"}\n' | $helper store
    expect '{"ServerURL":"r.example","Username":"\u003ctoken\u003e","Secret":"identity-token"}' "$(echo r.example | $helper get)"
    printf '{"ServerURL":"r2.example",\n"Username":"u",\n"Secret":"s","Extra":[1,{"x":null}]}' | $helper store
    expect s "$(echo r2.example | $helper get | python3 -c 'import json,sys; print(json.load(sys.stdin)["Secret"])')"
}

strict_matching() {
    echo '{"ServerURL":"http://plain.example:5000","Username":"u","Secret":"s"}' | $helper store
    expect 'credentials not found in native keychain' "$(echo https://plain.example:5000 | $helper get)" "https never matches http"
    expect 'credentials not found in native keychain' "$(echo plain.example:5000 | $helper get)" "no scheme means https"
    expect 'credentials not found in native keychain' "$(echo http://plain.example:5001 | $helper get)" "other port"
    expect 'credentials not found in native keychain' "$(echo http://plain.example:5000/other | $helper get)" "other path"
    echo http://plain.example:5000 | $helper get | grep -q '"Secret":"s"'
    echo '{"ServerURL":"[::1]:5000","Username":"v6","Secret":"s6"}' | $helper store
    echo '[::1]:5000' | $helper get | grep -q '"Secret":"s6"'
    expect s6 "$(security find-internet-password -s ::1 -P 5000 -r htps -w)"
}

list_only_docker_items() {
    security add-internet-password -a gituser -s git.example -r htps -w x
    echo '{"ServerURL":"https://index.docker.io/v1/","Username":"hubuser","Secret":"s"}' | $helper store
    echo '{"ServerURL":"localhost:5000","Username":"local","Secret":"s"}' | $helper store
    expect '{"https://index.docker.io/v1/":"hubuser","localhost:5000":"local"}' "$($helper list)"
    # An item made by hand with the label is listed under the URL rebuilt from its parts.
    security add-internet-password -a hand -s hand.example -r http -P 8080 -p /v2/ -l "Docker Credentials" -w x
    $helper list | grep -q '"http://hand.example:8080/v2/":"hand"'
}

errors_in_the_helpers_words() {
    expect 'Usage: docker-credential-keychain <store|get|erase|list|version>' "$($helper)"
    expect 1 "$($helper >/dev/null; echo $?)"
    expect 'Usage: docker-credential-keychain <store|get|erase|list|version>' "$($helper get extra)"
    expect 'Unknown credential action `frob`' "$($helper frob </dev/null)"
    expect 'no credentials server URL' "$(printf '\n \n' | $helper get)"
    expect 'no credentials server URL' "$($helper erase </dev/null)"
    expect 'no credentials server URL' "$(echo '{"Username":"u","Secret":"s"}' | $helper store)"
    expect 'no credentials username' "$(echo '{"ServerURL":"r.example","Secret":"s"}' | $helper store)"
    expect 'unsupported scheme: ftp' "$(echo '{"ServerURL":"ftp://r.example","Username":"u","Secret":"s"}' | $helper store)"
    expect 'unsupported scheme: ftp' "$(echo ftp://r.example | $helper get)"
    expect 'json: cannot unmarshal number into Go struct field Credentials.Username of type string' \
        "$(echo '{"ServerURL":"r","Username":5}' | $helper store)"
    expect 'json: cannot unmarshal array into Go value of type credentials.Credentials' "$(echo '[]' | $helper store)"
    { $helper store <<<'{"ServerURL":' || true; } | grep -q 'unexpected EOF'
    expect 'docker-credential-keychain (keychain-for-linux) 0.1.0' "$($helper version)"
    expect '{}' "$($helper list)"
}

locked_is_one_line() {
    echo '{"ServerURL":"r.example","Username":"u","Secret":"s"}' | $helper store
    security lock-keychain
    for action in get erase; do
        out=$(echo r.example | timeout 10 $helper $action) && status=0 || status=$?
        expect 1 "$status" "$action exits 1"
        expect 1 "$(echo "$out" | wc -l)"
        grep -q 'security unlock-keychain' <<< "$out"
    done
    out=$(timeout 10 $helper list </dev/null) && return 1
    grep -q 'security unlock-keychain' <<< "$out"
    out=$(echo '{"ServerURL":"r2.example","Username":"u","Secret":"s"}' | timeout 10 $helper store) && return 1
    grep -q 'security unlock-keychain' <<< "$out"
}

command -v docker >/dev/null && check "docker login/logout keep the password in the keychain" docker_login_logout
command -v docker >/dev/null && check "docker login with a wrong password stores nothing" docker_wrong_password
command -v docker >/dev/null && check "docker login with a locked keychain says how to unlock" docker_locked_keychain
check "skopeo login, copy, inspect, logout with credHelpers" skopeo_with_cred_helpers
check "store, get, erase" store_get_erase
check "new items trust the helper under docker's tools only" helper_items_list
check "field names, identity tokens, extra fields" field_names_and_tokens
check "http/https, ports and paths match strictly" strict_matching
check "list shows only Docker Credentials items" list_only_docker_items
check "errors in the helpers' words" errors_in_the_helpers_words
check "locked keychain: one line, no hang" locked_is_one_line
command -v docker >/dev/null || echo "note: no docker CLI; its three cases were not run"

summary
