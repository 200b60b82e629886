package inside

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"
)

// User is an account of the container, as a process is run as it.
type User struct {
	Name string `json:"name,omitempty"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
}

// LookupUser resolves a user the way Docker runs a process as one: "" is
// root; a name or a uid, with an optional ":group" (a name or a gid). A
// name is looked up in the container's /etc/passwd (troupe's binary is
// static, so this reads the files, not the host's name service); a uid
// that has no entry runs with gid 0, as in Docker.
func LookupUser(spec string) (User, error) {
	if spec == "" {
		return User{Name: "root"}, nil
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	var u User
	if uid, err := strconv.Atoi(name); err == nil && uid >= 0 {
		u.UID = uid
		if found, err := user.LookupId(name); err == nil {
			u.Name = found.Username
			u.GID, _ = strconv.Atoi(found.Gid)
		}
	} else {
		found, err := user.Lookup(name)
		if err != nil {
			if _, unknown := errors.AsType[user.UnknownUserError](err); unknown {
				return User{}, fmt.Errorf("user %q does not exist in the container's /etc/passwd: the task's image must create it (RUN useradd …)", name)
			}
			return User{}, fmt.Errorf("look up user %q: %w", name, err)
		}
		u.Name = found.Username
		u.UID, _ = strconv.Atoi(found.Uid)
		u.GID, _ = strconv.Atoi(found.Gid)
	}
	if hasGroup {
		if gid, err := strconv.Atoi(group); err == nil && gid >= 0 {
			u.GID = gid
		} else {
			found, err := user.LookupGroup(group)
			if err != nil {
				return User{}, fmt.Errorf("group %q of user %q does not exist in the container's /etc/group", group, spec)
			}
			u.GID, _ = strconv.Atoi(found.Gid)
		}
	}
	return u, nil
}

// Spec is the user as an exec's User field: "uid:gid".
func (u User) Spec() string { return fmt.Sprintf("%d:%d", u.UID, u.GID) }
