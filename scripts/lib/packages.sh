# Installs Debian packages that are missing, as root or through sudo. Sourced by
# scripts/up and scripts/test.
#
#   need <check> <package>   records <package> when <check> (a shell test) fails
#   install_needed           installs what was recorded, with one apt-get run

needed=()

need() {
    if ! eval "$1" >/dev/null 2>&1; then
        needed+=("$2")
    fi
}

install_needed() {
    [ ${#needed[@]} -gt 0 ] || return 0
    echo "installing Debian packages: ${needed[*]}" >&2
    as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "${needed[@]}"
    needed=()
}

# The media server: nginx with its RTMP module, and ffmpeg (thumbnails, restreams).
need_media_server() {
    need 'command -v nginx || test -x /usr/sbin/nginx' nginx
    need 'test -f /usr/lib/nginx/modules/ngx_rtmp_module.so' libnginx-mod-rtmp
    need 'command -v ffmpeg' ffmpeg
}
