#!/bin/sh
# Installs what `mvn -o test` needs in clients/java from Debian packages:
# the libraries and Maven plugins land in /usr/share/maven-repo, which
# .mvn/settings.xml mirrors every repository to. No Java registry is used.
set -eu
PACKAGES="
maven
openjdk-17-jdk-headless
libjackson2-databind-java
junit5
libsurefire-java
libmaven-compiler-plugin-java
libmaven-resources-plugin-java
libmaven-jar-plugin-java
"
if [ "${1:-}" = "--list" ]; then
  echo $PACKAGES
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $PACKAGES
